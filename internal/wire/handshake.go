package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// HandshakeMagic opens every handshake and handshake reply.
const HandshakeMagic = "HCOM"

// HandshakeVersion is the version of the handshake and frame formats this
// package speaks. Version 2 replaced the token carried in the clear by a
// challenge-response; version 3 placed the stripes of a message after the
// first by their offset (FrameStripe), so a stripe can be resent on another
// path; version 4 numbered the generations of a path's connections
// (Handshake.Gen, FrameRejoin), so a retired path can be dialed again;
// version 5 added the idle ping (FramePing) and the lead frame
// (FrameLead), which moves a pair's lead stream off a stopped path;
// version 6 gave the lead frame the offset where the lead it leaves began
// (FrameHeader.Offset) and counted lead-stream offsets across moves, so a
// lead moved twice is replayed right on a rank that never joined the
// first move; version 7 has a sender whose idle ping retired a path tell
// the receiver, with a stripe frame of no bytes naming the paths at the
// start of its next message, which a receiver still collecting the
// previous message takes for the end of it, not for a repair, and the
// first stripe of a striped message names the path it was written on
// (FrameHeader.First), so a receiver joining a lead moved three times
// knows it for a message written on a lead it never joined; version 8
// sends the reply of a one-sided Get over a window's message path as
// pieces (internal/rma's opPart), which a rank of version 7 takes for a
// malformed request and drops the peer; version 9 sends those pieces on a
// second transport of the window (its reply path), which a rank of
// version 8 never connects.
//
// The Handshake and HandshakeReply layouts are the same from version 5
// on, and stay so: a new version changes frames, never the first
// exchange, so that ranks of different versions tell each other so, with
// proof, before any frame is sent (VersionError).
const HandshakeVersion = 9

// FirstVersion is the oldest version whose Handshake has this package's
// layout: a listener decodes a handshake of any version from it on, runs
// the exchange in the dialer's version and, once the dialer has proven it
// belongs to the job, refuses it naming both versions.
const FirstVersion = 5

// ErrVersion is wrapped by the error (a *VersionError) of a handshake or
// handshake reply of another protocol version than this build's: a rank
// of the job runs a build that cannot talk to this one.
var ErrVersion = errors.New("hcomm: protocol version mismatch")

// VersionError reports a handshake or handshake reply in another protocol
// version than this build's (HandshakeVersion). It unwraps to ErrVersion.
type VersionError struct {
	Local  uint16 // the version this build speaks
	Remote uint16 // the version the other end speaks
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("wire: the other end speaks protocol version %d, this build version %d (every rank of a job must run a build of the same protocol version)", e.Remote, e.Local)
}

// Unwrap returns ErrVersion.
func (e *VersionError) Unwrap() error { return ErrVersion }

// MaxGen is the highest generation of a path's connections
// (Handshake.Gen).
const MaxGen = 255

// TokenSize is the size of the job token in bytes.
const TokenSize = 32

// NonceSize is the size of the random nonce each side of a handshake
// contributes; ProofSize the size of a proof (an HMAC-SHA256).
const (
	NonceSize = 32
	ProofSize = sha256.Size
)

// HandshakeSize is the size of an encoded Handshake in bytes.
const HandshakeSize = 64

// A data connection opens with a challenge-response in which neither side
// sends anything a listener could replay or use to impersonate a rank:
//
//  1. The dialer sends a Handshake: who it is, whom it means to reach, the
//     communicator, the connection's index, and a fresh nonce.
//  2. The listener answers a HandshakeReply with status ReplyChallenge
//     carrying a fresh nonce of its own (or refuses a malformed Handshake).
//  3. The dialer sends its proof, DialerProof: an HMAC keyed by the job key
//     over the Handshake and both nonces.
//  4. The listener checks the proof before it believes anything the
//     Handshake claims, and answers a final HandshakeReply (accept, refuse,
//     aborted) carrying its own proof, ListenerProof, over the same
//     transcript, its status and reason; the dialer checks it before it
//     trusts the connection. A listener that cannot verify the dialer sends
//     a refusal with a zero proof and a reason that says nothing about
//     itself.
//
// Both proofs bind the job key, the communicator, both ranks, the world
// size, the connection's index and both nonces, so a recorded exchange is
// worth nothing on another connection, and the dialer proves itself before
// the listener: a stranger who connects to a listener learns no value it
// could test token guesses against.

// Handshake is the first message on a new data connection, sent by the rank
// that dialed.
//
// Encoded layout:
//
//	[0:4]   "HCOM"
//	[4]     Version
//	[5]     Gen
//	[6:8]   Paths
//	[8:16]  CommID
//	[16:20] Rank
//	[20:24] Target
//	[24:28] Size
//	[28:30] Socket
//	[30:32] Sockets
//	[32:64] Nonce
type Handshake struct {
	Version uint16
	CommID  uint64 // the communicator both ends belong to
	Rank    uint32 // the dialing rank
	Target  uint32 // the rank the dialer means to reach
	Size    uint32 // the number of ranks in the communicator
	Socket  uint16 // index of this connection among the pair's
	Sockets uint16 // number of connections per pair
	// Paths is the set of network paths, one bit per listener address,
	// that the dialer found reachable and connects on (Socket / (Sockets /
	// number of paths) is this connection's path); zero means path 0 only.
	Paths uint16
	// Gen is the generation of the connection: 0 when the pair first
	// connects, then one more each time its path is dialed again after
	// it was retired (up to MaxGen), so the listener takes it as a
	// replacement rather than a duplicate.
	Gen   uint8
	Nonce [NonceSize]byte
}

// MarshalTo writes h to b[:HandshakeSize]. b must be at least that long.
func (h *Handshake) MarshalTo(b []byte) {
	b = b[:HandshakeSize]
	copy(b[0:4], HandshakeMagic)
	b[4] = uint8(h.Version)
	b[5] = h.Gen
	le.PutUint16(b[6:8], h.Paths)
	le.PutUint64(b[8:16], h.CommID)
	le.PutUint32(b[16:20], h.Rank)
	le.PutUint32(b[20:24], h.Target)
	le.PutUint32(b[24:28], h.Size)
	le.PutUint16(b[28:30], h.Socket)
	le.PutUint16(b[30:32], h.Sockets)
	copy(b[32:64], h.Nonce[:])
}

// Unmarshal decodes h from the first HandshakeSize bytes of b and checks
// that it is self-consistent: the magic, a supported version, ranks within
// Size and distinct, a socket index within the socket count. Nothing in it
// is to be believed before the dialer's proof verifies.
//
// A handshake of another version than HandshakeVersion gives a
// *VersionError; if its version is FirstVersion or later and it is
// otherwise well formed, h holds it decoded (Version the dialer's), so
// that the listener can run the exchange in that version and prove to the
// dialer that the versions differ. h is left as it was otherwise.
func (h *Handshake) Unmarshal(b []byte) error {
	if len(b) < HandshakeSize {
		return fmt.Errorf("wire: handshake needs %d bytes, have %d: %w", HandshakeSize, len(b), ErrMalformed)
	}
	b = b[:HandshakeSize]
	if string(b[0:4]) != HandshakeMagic {
		return fmt.Errorf("wire: handshake does not start with %q: %w", HandshakeMagic, ErrMalformed)
	}
	var d Handshake
	d.Version, d.Gen = uint16(b[4]), b[5]
	if d.Version < FirstVersion {
		return &VersionError{Local: HandshakeVersion, Remote: d.Version}
	}
	d.Paths = le.Uint16(b[6:8])
	d.CommID = le.Uint64(b[8:16])
	d.Rank = le.Uint32(b[16:20])
	d.Target = le.Uint32(b[20:24])
	d.Size = le.Uint32(b[24:28])
	d.Socket = le.Uint16(b[28:30])
	d.Sockets = le.Uint16(b[30:32])
	copy(d.Nonce[:], b[32:64])
	switch {
	case d.Rank >= d.Size || d.Target >= d.Size:
		return fmt.Errorf("wire: handshake from rank %d to rank %d in a world of %d: %w", d.Rank, d.Target, d.Size, ErrMalformed)
	case d.Rank == d.Target:
		return fmt.Errorf("wire: handshake from rank %d to itself: %w", d.Rank, ErrMalformed)
	case d.Socket >= d.Sockets:
		return fmt.Errorf("wire: handshake for socket %d of %d: %w", d.Socket, d.Sockets, ErrMalformed)
	}
	*h = d
	if d.Version != HandshakeVersion {
		return &VersionError{Local: HandshakeVersion, Remote: d.Version}
	}
	return nil
}

// HandshakeKey derives the key that proofs are made with from the job's
// token and the job's identity (any string both ends agree on, "" for
// none): a token reused by another job gives another key.
func HandshakeKey(token *[TokenSize]byte, job string) [ProofSize]byte {
	m := hmac.New(sha256.New, token[:])
	m.Write([]byte("hcomm tcp handshake key v2\x00"))
	m.Write([]byte(job))
	var k [ProofSize]byte
	m.Sum(k[:0])
	return k
}

// Labels that keep the two proofs of an exchange apart.
const (
	dialerLabel   = "hcomm tcp dialer proof v2\x00"
	listenerLabel = "hcomm tcp listener proof v2\x00"
)

// DialerProof returns the dialer's proof for the exchange that began with
// h and the listener's challenge nonce.
func DialerProof(key *[ProofSize]byte, h *Handshake, nonce *[NonceSize]byte) [ProofSize]byte {
	m := hmac.New(sha256.New, key[:])
	var b [HandshakeSize]byte
	h.MarshalTo(b[:])
	m.Write([]byte(dialerLabel))
	m.Write(b[:])
	m.Write(nonce[:])
	var p [ProofSize]byte
	m.Sum(p[:0])
	return p
}

// ListenerProof returns the listener's proof of its final reply, with
// status and reason, to the exchange that began with h and its challenge
// nonce.
func ListenerProof(key *[ProofSize]byte, h *Handshake, nonce *[NonceSize]byte, status ReplyStatus, reason string) [ProofSize]byte {
	m := hmac.New(sha256.New, key[:])
	var b [HandshakeSize]byte
	h.MarshalTo(b[:])
	m.Write([]byte(listenerLabel))
	m.Write(b[:])
	m.Write(nonce[:])
	var sb [2]byte
	sb[0] = uint8(status)
	sb[1] = uint8(len(reason))
	m.Write(sb[:])
	m.Write([]byte(reason))
	var p [ProofSize]byte
	m.Sum(p[:0])
	return p
}

// ProofEqual compares two proofs in constant time.
func ProofEqual(a, b *[ProofSize]byte) bool {
	return hmac.Equal(a[:], b[:])
}

// ReplyStatus is the listening rank's answer to a Handshake.
type ReplyStatus uint8

const (
	// ReplyAccept admits the connection; frames may follow.
	ReplyAccept ReplyStatus = 1
	// ReplyRefuse turns the connection away; Reason says why.
	ReplyRefuse ReplyStatus = 2
	// ReplyAborted turns the connection away because the listening rank
	// has aborted; Reason carries the abort's cause.
	ReplyAborted ReplyStatus = 3
	// ReplyChallenge asks the dialer to prove it holds the job key; Data
	// is the listener's nonce.
	ReplyChallenge ReplyStatus = 4
)

func (s ReplyStatus) String() string {
	switch s {
	case ReplyAccept:
		return "accept"
	case ReplyRefuse:
		return "refuse"
	case ReplyAborted:
		return "aborted"
	case ReplyChallenge:
		return "challenge"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// ReplyHeaderSize is the size of the fixed part of an encoded
// HandshakeReply; up to MaxReplyReason bytes of reason follow it.
const ReplyHeaderSize = 40

// MaxReplyReason is the longest reason a HandshakeReply carries, in bytes.
const MaxReplyReason = 255

// HandshakeReply is the listening rank's answer to a Handshake: first a
// challenge, then, once the dialer's proof is in, the verdict.
//
// Encoded layout:
//
//	[0:4]   "HCOM"
//	[4:6]   Version
//	[6]     Status
//	[7]     length of Reason
//	[8:40]  Data: the listener's nonce (ReplyChallenge), else its proof
//	        (zero in a refusal of a dialer that did not prove itself)
//	[40:]   Reason
type HandshakeReply struct {
	Version uint16
	Status  ReplyStatus
	Data    [ProofSize]byte
	Reason  string // why the connection was refused; empty otherwise
}

// AppendTo appends the encoding of r to b. A reason longer than
// MaxReplyReason bytes is cut (callers proving a reply should cut it first,
// with CutReason, so that the proof covers what is sent).
func (r *HandshakeReply) AppendTo(b []byte) []byte {
	reason := truncateUTF8(r.Reason, MaxReplyReason)
	var hb [ReplyHeaderSize]byte
	copy(hb[0:4], HandshakeMagic)
	le.PutUint16(hb[4:6], r.Version)
	hb[6] = uint8(r.Status)
	hb[7] = uint8(len(reason))
	copy(hb[8:40], r.Data[:])
	b = append(b, hb[:]...)
	return append(b, reason...)
}

// CutReason returns reason as a HandshakeReply carries it: valid UTF-8 of
// at most MaxReplyReason bytes.
func CutReason(reason string) string {
	return truncateUTF8(AbortReason([]byte(reason)), MaxReplyReason)
}

// ReadHandshakeReply reads and checks one HandshakeReply from rd: the magic,
// a supported version, a known status, no reason in a challenge and a reason
// of the announced length. It reads no more than the reply. A reply of
// another version than HandshakeVersion that is otherwise well formed is
// returned decoded with a *VersionError (a listener of another build says
// why it refuses in its own version).
func ReadHandshakeReply(rd io.Reader) (HandshakeReply, error) {
	var hb [ReplyHeaderSize]byte
	if _, err := io.ReadFull(rd, hb[:]); err != nil {
		return HandshakeReply{}, err
	}
	if string(hb[0:4]) != HandshakeMagic {
		return HandshakeReply{}, fmt.Errorf("wire: handshake reply does not start with %q: %w", HandshakeMagic, ErrMalformed)
	}
	r := HandshakeReply{
		Version: le.Uint16(hb[4:6]),
		Status:  ReplyStatus(hb[6]),
	}
	copy(r.Data[:], hb[8:40])
	if r.Status < ReplyAccept || r.Status > ReplyChallenge {
		return HandshakeReply{}, fmt.Errorf("wire: handshake reply status %d: %w", hb[6], ErrMalformed)
	}
	n := int(hb[7])
	if n > 0 && r.Status == ReplyChallenge {
		return HandshakeReply{}, fmt.Errorf("wire: handshake challenge carries a reason: %w", ErrMalformed)
	}
	if n > 0 {
		var reason [MaxReplyReason]byte
		if _, err := io.ReadFull(rd, reason[:n]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return HandshakeReply{}, err
		}
		r.Reason = string(reason[:n])
	}
	if r.Version != HandshakeVersion {
		return r, &VersionError{Local: HandshakeVersion, Remote: r.Version}
	}
	return r, nil
}

// PrintableReason returns r.Reason made valid UTF-8, for messages. (The
// proof covers the bytes as sent, so ReadHandshakeReply keeps them.)
func (r *HandshakeReply) PrintableReason() string {
	return AbortReason([]byte(r.Reason))
}

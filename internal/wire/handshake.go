package wire

import (
	"crypto/subtle"
	"fmt"
	"io"
)

// HandshakeMagic opens every handshake and handshake reply.
const HandshakeMagic = "HCOM"

// HandshakeVersion is the version of the handshake and frame formats this
// package speaks.
const HandshakeVersion = 1

// TokenSize is the size of the job token in bytes.
const TokenSize = 32

// HandshakeSize is the size of an encoded Handshake in bytes.
const HandshakeSize = 64

// Handshake is the first message on a new data connection, sent by the rank
// that dialed. The accepting rank checks every field against its own
// configuration before it lets a frame through.
//
// Encoded layout:
//
//	[0:4]   "HCOM"
//	[4:6]   Version
//	[6:8]   reserved, zero
//	[8:40]  Token
//	[40:48] CommID
//	[48:52] Rank
//	[52:56] Target
//	[56:60] Size
//	[60:62] Socket
//	[62:64] Sockets
type Handshake struct {
	Version uint16
	Token   [TokenSize]byte // the job's shared secret
	CommID  uint64          // the communicator both ends belong to
	Rank    uint32          // the dialing rank
	Target  uint32          // the rank the dialer means to reach
	Size    uint32          // the number of ranks in the communicator
	Socket  uint16          // index of this connection among the pair's
	Sockets uint16          // number of connections per pair
}

// MarshalTo writes h to b[:HandshakeSize]. b must be at least that long.
func (h *Handshake) MarshalTo(b []byte) {
	b = b[:HandshakeSize]
	copy(b[0:4], HandshakeMagic)
	le.PutUint16(b[4:6], h.Version)
	b[6], b[7] = 0, 0
	copy(b[8:40], h.Token[:])
	le.PutUint64(b[40:48], h.CommID)
	le.PutUint32(b[48:52], h.Rank)
	le.PutUint32(b[52:56], h.Target)
	le.PutUint32(b[56:60], h.Size)
	le.PutUint16(b[60:62], h.Socket)
	le.PutUint16(b[62:64], h.Sockets)
}

// Unmarshal decodes h from the first HandshakeSize bytes of b and checks
// that it is self-consistent: the magic, a supported version, ranks within
// Size and distinct, a socket index within the socket count. Whether the
// token, communicator and ranks are the ones the receiver expects is for
// the receiver to check (see TokenMatches).
func (h *Handshake) Unmarshal(b []byte) error {
	if len(b) < HandshakeSize {
		return fmt.Errorf("wire: handshake needs %d bytes, have %d: %w", HandshakeSize, len(b), ErrMalformed)
	}
	b = b[:HandshakeSize]
	if string(b[0:4]) != HandshakeMagic {
		return fmt.Errorf("wire: handshake does not start with %q: %w", HandshakeMagic, ErrMalformed)
	}
	var d Handshake
	d.Version = le.Uint16(b[4:6])
	if d.Version != HandshakeVersion {
		return fmt.Errorf("wire: handshake version %d, want %d: %w", d.Version, HandshakeVersion, ErrMalformed)
	}
	if b[6] != 0 || b[7] != 0 {
		return fmt.Errorf("wire: handshake reserved field is not zero: %w", ErrMalformed)
	}
	copy(d.Token[:], b[8:40])
	d.CommID = le.Uint64(b[40:48])
	d.Rank = le.Uint32(b[48:52])
	d.Target = le.Uint32(b[52:56])
	d.Size = le.Uint32(b[56:60])
	d.Socket = le.Uint16(b[60:62])
	d.Sockets = le.Uint16(b[62:64])
	switch {
	case d.Rank >= d.Size || d.Target >= d.Size:
		return fmt.Errorf("wire: handshake from rank %d to rank %d in a world of %d: %w", d.Rank, d.Target, d.Size, ErrMalformed)
	case d.Rank == d.Target:
		return fmt.Errorf("wire: handshake from rank %d to itself: %w", d.Rank, ErrMalformed)
	case d.Socket >= d.Sockets:
		return fmt.Errorf("wire: handshake for socket %d of %d: %w", d.Socket, d.Sockets, ErrMalformed)
	}
	*h = d
	return nil
}

// TokenMatches reports whether h carries token, comparing in constant time.
func (h *Handshake) TokenMatches(token *[TokenSize]byte) bool {
	return subtle.ConstantTimeCompare(h.Token[:], token[:]) == 1
}

// ReplyStatus is the accepting rank's answer to a Handshake.
type ReplyStatus uint8

const (
	// ReplyAccept admits the connection; frames may follow.
	ReplyAccept ReplyStatus = 1
	// ReplyRefuse turns the connection away; Reason says why.
	ReplyRefuse ReplyStatus = 2
	// ReplyAborted turns the connection away because the accepting rank
	// has aborted; Reason carries the abort's cause.
	ReplyAborted ReplyStatus = 3
)

func (s ReplyStatus) String() string {
	switch s {
	case ReplyAccept:
		return "accept"
	case ReplyRefuse:
		return "refuse"
	case ReplyAborted:
		return "aborted"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// ReplyHeaderSize is the size of the fixed part of an encoded
// HandshakeReply; up to MaxReplyReason bytes of reason follow it.
const ReplyHeaderSize = 24

// MaxReplyReason is the longest reason a HandshakeReply carries, in bytes.
const MaxReplyReason = 255

// HandshakeReply is the accepting rank's answer to a Handshake. An accepting
// reply names the accepting rank and communicator so the dialer can check it
// reached the rank it meant to.
//
// Encoded layout:
//
//	[0:4]   "HCOM"
//	[4:6]   Version
//	[6]     Status
//	[7]     length of Reason
//	[8:12]  Rank
//	[12:16] reserved, zero
//	[16:24] CommID
//	[24:]   Reason
type HandshakeReply struct {
	Version uint16
	Status  ReplyStatus
	Rank    uint32 // the replying rank
	CommID  uint64 // the replying rank's communicator
	Reason  string // why the connection was refused; empty when accepted
}

// AppendTo appends the encoding of r to b. A reason longer than
// MaxReplyReason is cut.
func (r *HandshakeReply) AppendTo(b []byte) []byte {
	reason := truncateUTF8(r.Reason, MaxReplyReason)
	var hb [ReplyHeaderSize]byte
	copy(hb[0:4], HandshakeMagic)
	le.PutUint16(hb[4:6], r.Version)
	hb[6] = uint8(r.Status)
	hb[7] = uint8(len(reason))
	le.PutUint32(hb[8:12], r.Rank)
	le.PutUint64(hb[16:24], r.CommID)
	b = append(b, hb[:]...)
	return append(b, reason...)
}

// ReadHandshakeReply reads and checks one HandshakeReply from rd: the magic,
// a supported version, a known status and a reason of the announced length.
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
		Rank:    le.Uint32(hb[8:12]),
		CommID:  le.Uint64(hb[16:24]),
	}
	if r.Version != HandshakeVersion {
		return HandshakeReply{}, fmt.Errorf("wire: handshake reply version %d, want %d: %w", r.Version, HandshakeVersion, ErrMalformed)
	}
	if r.Status < ReplyAccept || r.Status > ReplyAborted {
		return HandshakeReply{}, fmt.Errorf("wire: handshake reply status %d: %w", hb[6], ErrMalformed)
	}
	if !allZero(hb[12:16]) {
		return HandshakeReply{}, fmt.Errorf("wire: handshake reply reserved field is not zero: %w", ErrMalformed)
	}
	if n := int(hb[7]); n > 0 {
		var reason [MaxReplyReason]byte
		if _, err := io.ReadFull(rd, reason[:n]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return HandshakeReply{}, err
		}
		// Replacing invalid bytes may lengthen the text; keep it within
		// the limit so the reply re-encodes to what was read.
		r.Reason = truncateUTF8(AbortReason(reason[:n]), MaxReplyReason)
	}
	return r, nil
}

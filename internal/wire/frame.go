package wire

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// FrameType tells what a frame on a data connection carries.
type FrameType uint8

const (
	// FrameData carries (a stripe of) one message: the header is followed
	// by Len bytes of payload.
	FrameData FrameType = 1
	// FrameAbort tells the receiver that the sender aborted: the header is
	// followed by Len bytes of UTF-8 text saying why.
	FrameAbort FrameType = 2
	// FrameStripe carries a stripe of a message other than its first,
	// placed by Offset: the header is followed by Len bytes of payload for
	// bytes [Offset, Offset+Len) of the message. With Paths not zero it is
	// a repair: it travels on another path than the stripes it replaces,
	// those of the same message on the paths Paths names, which the
	// sender has stopped using.
	FrameStripe FrameType = 3
	// FrameRejoin tells the receiver that from the next message on, the
	// sender moves the stripes of the paths Paths names over their
	// connections of generation Total (1 to 255): connections dialed
	// again after the path was retired (see Handshake.Gen). It carries no
	// payload and no fingerprint.
	FrameRejoin FrameType = 4
	// FramePing keeps an idle connection's path watched: the sender writes
	// it at a low rate on a connection with nothing else in flight, and a
	// path whose pings the peer's host does not acknowledge is retired.
	// Receivers skip it wherever a header may come. It carries nothing:
	// every other field is zero. (Type 5 is kept for the lead frame of the
	// first path's failover.)
	FramePing FrameType = 6
	// FrameLead tells the receiver that the sender moved the pair's lead
	// stream (small messages and first stripes, connection 0's role) off
	// the path Paths names, which stopped, onto the connection the frame
	// arrives on. Total is the resume offset: the byte of the old lead
	// stream its first payload byte stands for, which the peer's host had
	// acknowledged. The Len payload bytes are the old stream's bytes from
	// there on, sent again; the lead stream goes on after them on this
	// connection. The receiver takes the old stream up to what it has
	// read (or still holds) and the replay from there, so bytes it read
	// twice are skipped. Carries no fingerprint and no flags: no checksum
	// of its own, as its payload is stream bytes that the receiver reads as
	// frames, whose payloads carry their checksums when the sender sends
	// them (with FlagCRC32C), checked once the frames are read whole.
	// Offsets of the lead stream count its bytes across moves (a lead
	// frame's own header is not one of them), and Offset is where the
	// lead on the path Paths names began: a receiver that never joined
	// that lead (its lead frame lost with it) knows which of the replayed
	// bytes were written there. Offset <= Total+Len.
	FrameLead FrameType = 5
)

func (t FrameType) String() string {
	switch t {
	case FrameData:
		return "data"
	case FrameAbort:
		return "abort"
	case FrameStripe:
		return "stripe"
	case FrameRejoin:
		return "rejoin"
	case FramePing:
		return "ping"
	case FrameLead:
		return "lead"
	}
	return fmt.Sprintf("frame(%d)", uint8(t))
}

// FrameHeaderSize is the size of an encoded FrameHeader in bytes.
const FrameHeaderSize = 24 + FingerprintSize

// MaxAbortReason is the longest reason text an abort frame may carry, in
// bytes. Longer reasons are cut when encoded and refused when decoded.
const MaxAbortReason = 1024

// FrameHeader precedes every frame on a data connection.
//
// A message may be striped over several connections; each stripe travels as
// a frame of its own: the first as a data frame whose Total is the length of
// the whole message, the others as stripe frames placed by their Offset,
// each with the message's fingerprint, so the receiver can check each
// stripe against the message it expects before reading a byte of payload
// into its buffer.
//
// Encoded layout:
//
//	[0]     Type
//	[1]     Flags
//	[2:4]   Paths (data, stripe, rejoin and lead frames); zero otherwise
//	[4:8]   Checksum
//	[8:16]  Len
//	[16:24] Total (data frames); Offset (stripe frames); the lost rank
//	        (abort frames with FlagLost); the generation (rejoin frames);
//	        the resume offset (lead frames)
//	[24:48] Fingerprint (data and stripe frames; zero in abort frames)
type FrameHeader struct {
	Type FrameType
	// Flags is zero or, on a data or stripe frame, FlagCRC32C, on an
	// abort frame, FlagLost.
	Flags uint8
	// Paths is, on the first stripe of a message striped over several
	// network paths (Len < Total), the set of paths whose connections carry
	// its other stripes, one bit per path; on a repair (a stripe frame),
	// the paths whose stripes it replaces; on a rejoin frame the paths it
	// moves; on a lead frame the one path the lead stream leaves; zero on
	// other frames.
	Paths uint16
	// Checksum is the CRC32C (Castagnoli) of the frame's payload when Flags
	// has FlagCRC32C, and zero otherwise.
	Checksum uint32
	// Len is the number of payload bytes that follow the header.
	Len uint64
	// Total is, for a data frame, the length of the whole message this
	// frame is a stripe of (Len <= Total). For an abort frame it is zero,
	// or with FlagLost the rank whose loss caused the abort (below 2^32).
	// Zero for a stripe frame, whose receiver knows the total from the
	// message's first stripe. For a lead frame, the resume offset (see
	// FrameLead; Total+Len does not overflow).
	Total uint64
	// Offset is, for a stripe frame, where its payload goes in the message
	// (Offset+Len does not overflow); for a lead frame, where the lead it
	// leaves began (see FrameLead); zero otherwise.
	Offset uint64
	// First is, on the first stripe of a message striped over several
	// paths (a data frame with Paths), the path whose connection it was
	// written on (the sender's lead then), below 16; zero otherwise. A
	// receiver that reads the frame again from a moved lead's replay
	// knows by it which connection carries no other stripe of the
	// message. Encoded in the flags byte's upper four bits.
	First       uint8
	Fingerprint Fingerprint
}

// MarshalTo writes h to b[:FrameHeaderSize]. b must be at least that long.
func (h *FrameHeader) MarshalTo(b []byte) {
	b = b[:FrameHeaderSize]
	b[0] = uint8(h.Type)
	b[1] = h.Flags | h.First<<4
	le.PutUint16(b[2:4], h.Paths)
	le.PutUint32(b[4:8], h.Checksum)
	le.PutUint64(b[8:16], h.Len)
	if h.Type == FrameStripe {
		le.PutUint64(b[16:24], h.Offset)
	} else {
		le.PutUint64(b[16:24], h.Total)
	}
	h.Fingerprint.MarshalTo(b[24:])
	if h.Type == FrameLead {
		le.PutUint64(b[24:32], h.Offset)
	}
}

// FlagCRC32C marks a data or stripe frame whose Checksum is the CRC32C of its payload.
const FlagCRC32C uint8 = 1

// FlagLost marks an abort frame whose root cause is the loss of the rank
// in Total, so that the receiver reports that rank, not the messenger.
const FlagLost uint8 = 2

// Unmarshal decodes h from the first FrameHeaderSize bytes of b and checks
// that it is well formed: a known type, no flags but FlagCRC32C on data
// and stripe frames (and First, on a striped data frame only), zero reserved fields, Len <= Total for data frames,
// Offset+Len within 2^64 for stripe frames, for abort frames a reason no longer than
// MaxAbortReason with no fingerprint, and for rejoin frames some paths, a
// generation from 1 to MaxGen and nothing else, and for lead frames one
// path, a resume offset plus Len within 2^64, a start (Offset) not past
// their end and no fingerprint. It never trusts Len beyond that: the
// caller compares it with what it is prepared to read.
func (h *FrameHeader) Unmarshal(b []byte) error {
	if len(b) < FrameHeaderSize {
		return fmt.Errorf("wire: frame header needs %d bytes, have %d: %w", FrameHeaderSize, len(b), ErrMalformed)
	}
	b = b[:FrameHeaderSize]
	var d FrameHeader
	d.Type = FrameType(b[0])
	d.Flags = b[1]
	if d.Type == FrameData {
		d.First, d.Flags = b[1]>>4, b[1]&0x0f
	}
	d.Paths = le.Uint16(b[2:4])
	d.Checksum = le.Uint32(b[4:8])
	d.Len = le.Uint64(b[8:16])
	d.Total = le.Uint64(b[16:24])
	if d.Type == FrameStripe {
		d.Offset, d.Total = d.Total, 0
	}
	fp := b[24:]
	if d.Type == FrameLead {
		d.Offset, fp = le.Uint64(b[24:32]), b[32:]
	}
	isData := d.Type == FrameData || d.Type == FrameStripe
	switch {
	case isData && d.Flags&^FlagCRC32C != 0,
		d.Type == FrameAbort && d.Flags&^FlagLost != 0,
		!isData && d.Type != FrameAbort && d.Flags != 0:
		return fmt.Errorf("wire: unsupported frame flags %#x: %w", d.Flags, ErrMalformed)
	}
	if !isData && d.Type != FrameRejoin && d.Type != FrameLead && d.Paths != 0 || d.Flags&FlagCRC32C == 0 && d.Checksum != 0 {
		return fmt.Errorf("wire: frame header reserved fields are not zero: %w", ErrMalformed)
	}
	switch d.Type {
	case FrameData:
		if d.Len > d.Total {
			return fmt.Errorf("wire: data frame of %d bytes claims to be part of a %d-byte message: %w", d.Len, d.Total, ErrMalformed)
		}
		if d.First != 0 && d.Paths == 0 {
			return fmt.Errorf("wire: data frame names the path %d of a first stripe without being striped: %w", d.First, ErrMalformed)
		}
		if err := d.Fingerprint.Unmarshal(b[24:]); err != nil {
			return err
		}
	case FrameStripe:
		if d.Offset+d.Len < d.Offset {
			return fmt.Errorf("wire: stripe of %d bytes at offset %d overflows: %w", d.Len, d.Offset, ErrMalformed)
		}
		if err := d.Fingerprint.Unmarshal(b[24:]); err != nil {
			return err
		}
	case FrameAbort:
		if d.Len > MaxAbortReason {
			return fmt.Errorf("wire: abort reason of %d bytes exceeds %d: %w", d.Len, MaxAbortReason, ErrMalformed)
		}
		if d.Flags&FlagLost == 0 && d.Total != 0 || !allZero(b[24:]) {
			return fmt.Errorf("wire: abort frame carries message fields: %w", ErrMalformed)
		}
		if d.Total > 1<<32-1 {
			return fmt.Errorf("wire: abort frame names lost rank %d: %w", d.Total, ErrMalformed)
		}
	case FrameRejoin:
		if d.Paths == 0 || d.Len != 0 || d.Total == 0 || d.Total > MaxGen || !allZero(b[24:]) {
			return fmt.Errorf("wire: rejoin frame of paths %#x, generation %d, %d payload bytes: %w", d.Paths, d.Total, d.Len, ErrMalformed)
		}
	case FramePing:
		if d.Len != 0 || d.Total != 0 || !allZero(b[24:]) {
			return fmt.Errorf("wire: ping frame with %d payload bytes, total %d or a fingerprint: %w", d.Len, d.Total, ErrMalformed)
		}
	case FrameLead:
		if d.Paths == 0 || d.Paths&(d.Paths-1) != 0 || d.Total+d.Len < d.Total || d.Offset > d.Total+d.Len || !allZero(fp) {
			return fmt.Errorf("wire: lead frame leaving paths %#x from %d, resuming at %d with %d bytes: %w", d.Paths, d.Offset, d.Total, d.Len, ErrMalformed)
		}
	default:
		return fmt.Errorf("wire: unknown frame type %d: %w", b[0], ErrMalformed)
	}
	*h = d
	return nil
}

// AppendAbortFrame appends an abort frame carrying reason to b: a header
// followed by the reason text, made valid UTF-8 and cut to at most
// MaxAbortReason bytes.
func AppendAbortFrame(b []byte, reason string) []byte {
	return AppendLostAbortFrame(b, reason, -1)
}

// AppendLostAbortFrame appends an abort frame as AppendAbortFrame does
// that, if lost >= 0, names rank lost as the abort's root cause.
func AppendLostAbortFrame(b []byte, reason string, lost int) []byte {
	reason = truncateUTF8(strings.ToValidUTF8(reason, "\uFFFD"), MaxAbortReason)
	h := FrameHeader{Type: FrameAbort, Len: uint64(len(reason))}
	if lost >= 0 && uint64(lost) <= 1<<32-1 {
		h.Flags, h.Total = FlagLost, uint64(lost)
	}
	var hb [FrameHeaderSize]byte
	h.MarshalTo(hb[:])
	b = append(b, hb[:]...)
	return append(b, reason...)
}

// AbortReason turns the payload of an abort frame into printable text.
func AbortReason(p []byte) string {
	return strings.ToValidUTF8(string(p), "\uFFFD")
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

package rma

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The message path: requests and replies travel as a fixed-size header
// message, followed for Put and PutSignal by the payload: one message per
// chunk of the contiguous range, or per chunk of each row of a strided
// one. Both ends derive the payload's messages from the header, so they
// agree without further framing.
//
// A successful Get's reply travels as pieces (opPart): each a header
// naming the piece's place in the reply (off: its first byte, the rows
// laid end to end; n: its length, at most a chunk and within one row),
// followed by the piece; the last (add = 1) completes the request.
// Where the window has a reply path (Params.Replies: a second transport,
// made when some rank uses messages) the pieces go there, sent by a
// replier goroutine of their own and received by a goroutine of their
// own, and nothing else does: a rank's requests to a peer then never queue
// behind the bytes of its reply to that peer's Get already in the
// sockets. Without one, between pieces the target's own requests to the
// requester may go out.
//
// Ranks of one job speak the same messages: a change to them bumps the
// transport's protocol version (wire.HandshakeVersion), so that a rank of
// another build is refused at its first connection, naming both versions,
// instead of dropping its peer at the first message it cannot read.
// partsVersion is the version that brought opPart, repliesVersion the one
// that moved the pieces to the window's reply path (Params.Replies).

const (
	headerSize  = 64
	headerMagic = 0x414d_5248 // "HRMA" read as little endian

	// maxPayload bounds the bytes a request may move, so a hostile
	// header cannot make the target drain forever.
	maxPayload = 1 << 42
	maxRows    = 1 << 31

	partsVersion   = 8
	repliesVersion = 9
)

// Operations.
const (
	opPut uint8 = iota + 1
	opGet
	opPutSignal
	opReply
	opPart // a piece of a Get's reply
)

// Reply statuses.
const (
	stOK uint8 = iota
	stBounds
	stStale
	stBadSignal
)

// header is a decoded request or reply.
type header struct {
	op     uint8
	status uint8 // replies
	win    uint32
	nonce  uint32 // the target window's incarnation
	sig    uint32
	rows   uint32 // 0 or 1: contiguous
	off    uint64 // in the target window
	n      uint64 // bytes (per row when strided)
	pitch  uint64 // target-side row pitch
	add    uint64
	req    uint64 // request number, echoed by the reply
}

func (h *header) encode(b []byte) {
	_ = b[headerSize-1]
	binary.LittleEndian.PutUint32(b[0:], headerMagic)
	b[4], b[5], b[6], b[7] = h.op, h.status, 0, 0
	binary.LittleEndian.PutUint32(b[8:], h.win)
	binary.LittleEndian.PutUint32(b[12:], h.nonce)
	binary.LittleEndian.PutUint32(b[16:], h.sig)
	binary.LittleEndian.PutUint32(b[20:], h.rows)
	binary.LittleEndian.PutUint64(b[24:], h.off)
	binary.LittleEndian.PutUint64(b[32:], h.n)
	binary.LittleEndian.PutUint64(b[40:], h.pitch)
	binary.LittleEndian.PutUint64(b[48:], h.add)
	binary.LittleEndian.PutUint64(b[56:], h.req)
}

var errBadHeader = errors.New("malformed one-sided request")

// decode parses a header from a peer. It checks only what keeps the
// message stream sound (magic, operation, payload size); window, bounds
// and signal are checked against the registration by the caller.
func (h *header) decode(b []byte) error {
	if len(b) != headerSize {
		return fmt.Errorf("%w: %d bytes, want %d", errBadHeader, len(b), headerSize)
	}
	if m := binary.LittleEndian.Uint32(b[0:]); m != headerMagic {
		return fmt.Errorf("%w: magic %#x", errBadHeader, m)
	}
	*h = header{
		op:     b[4],
		status: b[5],
		win:    binary.LittleEndian.Uint32(b[8:]),
		nonce:  binary.LittleEndian.Uint32(b[12:]),
		sig:    binary.LittleEndian.Uint32(b[16:]),
		rows:   binary.LittleEndian.Uint32(b[20:]),
		off:    binary.LittleEndian.Uint64(b[24:]),
		n:      binary.LittleEndian.Uint64(b[32:]),
		pitch:  binary.LittleEndian.Uint64(b[40:]),
		add:    binary.LittleEndian.Uint64(b[48:]),
		req:    binary.LittleEndian.Uint64(b[56:]),
	}
	if b[6] != 0 || b[7] != 0 {
		return fmt.Errorf("%w: reserved bytes set", errBadHeader)
	}
	switch h.op {
	case opPut, opGet, opPutSignal, opReply, opPart:
	default:
		return fmt.Errorf("%w: operation %d", errBadHeader, h.op)
	}
	if h.rows > maxRows {
		return fmt.Errorf("%w: %d rows", errBadHeader, h.rows)
	}
	if h.n > maxPayload || h.rows > 0 && h.n > maxPayload/uint64(h.rows) { // rows × n would overflow
		return fmt.Errorf("%w: %d rows of %d bytes", errBadHeader, max(h.rows, 1), h.n)
	}
	if h.off > math.MaxInt64 || h.pitch > math.MaxInt64 {
		return fmt.Errorf("%w: offset %d, pitch %d", errBadHeader, h.off, h.pitch)
	}
	if h.op == opReply && h.status > stBadSignal {
		return fmt.Errorf("%w: reply status %d", errBadHeader, h.status)
	}
	if h.op == opPart && (h.status != stOK || h.rows > 1 || h.n == 0 || h.add > 1) {
		return fmt.Errorf("%w: reply piece of %d rows of %d bytes, status %d, last %d", errBadHeader, h.rows, h.n, h.status, h.add)
	}
	return nil
}

// payloadRows returns the number of rows and the bytes per row of the
// payload that follows h (0 rows: none).
func (h *header) payloadRows() (rows, n int) {
	if h.n == 0 {
		return 0, 0
	}
	return int(max(h.rows, 1)), int(h.n)
}

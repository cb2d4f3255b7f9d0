package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Each ring position has an entry of entrySize bytes beside its slot: a
// 64-byte line with the position's stamp and, at a message's first
// position, the message header; and a second line that carries the
// payload of messages of up to inlineMax bytes, which then use no slot.
// The consumer polls the stamp, so a small message costs it the one
// 128-byte pair of lines that adjacent-line prefetch fetches together.
const (
	hdrSize   = 64
	entrySize = 128
	inlineMax = entrySize - hdrSize
)

// Message kinds.
const (
	kindInline uint32 = 1 // payload follows the header and fills later slots
	kindCMA    uint32 = 2 // payload stays in the sender; addr tells where
)

// Entry layout, little endian:
//
//	 0  uint32 stamp: the ring position + 1, written last (atomically)
//	 4  uint32 kind (0 at a position that continues a message)
//	 8  uint64 payload length
//	16  uint64 fingerprint Seq
//	24  uint8  Coll, uint8 DType, uint8 Op, uint8 reserved
//	28  int32  Root
//	32  int64  Count
//	40  uint64 sender address of the payload (kindCMA)
//	48  16 bytes reserved
//	64  payload of up to inlineMax bytes (kindInline)
type msgHeader struct {
	kind   uint32
	length uint64
	fp     wire.Fingerprint
	addr   uint64
}

var errShortHeader = errors.New("message header shorter than 64 bytes")

// encode writes h into the entry b (hdrSize bytes at least), all but the
// stamp.
func (h *msgHeader) encode(b []byte) {
	b = b[:hdrSize]
	le := binary.LittleEndian
	le.PutUint32(b[4:], h.kind)
	le.PutUint64(b[8:], h.length)
	le.PutUint64(b[16:], h.fp.Seq)
	b[24] = byte(h.fp.Coll)
	b[25] = byte(h.fp.DType)
	b[26] = byte(h.fp.Op)
	b[27] = 0
	le.PutUint32(b[28:], uint32(h.fp.Root))
	le.PutUint64(b[32:], uint64(h.fp.Count))
	le.PutUint64(b[40:], h.addr)
	clear(b[48:hdrSize])
}

// decodeHeader parses a header written by a peer. It checks everything
// that does not depend on the receiver's expectations: the kind and that
// the length fits an int.
func decodeHeader(b []byte) (msgHeader, error) {
	if len(b) < hdrSize {
		return msgHeader{}, errShortHeader
	}
	le := binary.LittleEndian
	h := msgHeader{
		kind:   le.Uint32(b[4:]),
		length: le.Uint64(b[8:]),
		fp: wire.Fingerprint{
			Seq:   le.Uint64(b[16:]),
			Coll:  sched.Coll(b[24]),
			DType: reduce.DType(b[25]),
			Op:    reduce.Op(b[26]),
			Root:  int32(le.Uint32(b[28:])),
			Count: int64(le.Uint64(b[32:])),
		},
		addr: le.Uint64(b[40:]),
	}
	switch {
	case h.kind != kindInline && h.kind != kindCMA:
		return msgHeader{}, fmt.Errorf("unknown message kind %d", h.kind)
	case h.length > math.MaxInt:
		return msgHeader{}, fmt.Errorf("message length %d out of range", h.length)
	}
	return h, nil
}

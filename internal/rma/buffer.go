package rma

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"unsafe"
)

// A Buffer is registered memory: a /dev/shm segment of this rank that the
// ranks of the same memory domain map, so that a collective can read and
// write a peer's buffer directly. Unlike a window a buffer has no signals,
// no message path and no goroutines; it is only shared memory and the
// mappings of the peers' buffers.
type Buffer struct {
	rank  int
	seg   *segment
	mem   []byte
	peers [][]byte   // peers[r]: rank r's memory as mapped here; nil when not mapped
	segs  []*segment // the peers' mapped segments
	// Shared reports whether every rank maps every other rank's buffer
	// (the same answer on every rank).
	Shared bool
}

// BufferParams describe a buffer being made.
type BufferParams struct {
	Rank, Size int
	N          int // bytes of this rank's buffer (may differ between ranks)
	// Exchange gathers every rank's record (RecordSize bytes) in rank order.
	Exchange func(ctx context.Context, rec []byte) ([]byte, error)
	// Local forces no mapping of peers (their buffers are then unreachable).
	Local bool
}

const bufMagic = 0x4655_4252 // "RBUF"

// NewBuffer makes a buffer; every rank of the group calls it. The segment
// names are unlinked before it returns, so nothing is left in /dev/shm
// once the ranks' processes exit, whatever happens to them.
func NewBuffer(ctx context.Context, p BufferParams) (*Buffer, error) {
	if p.N < 0 || uint64(p.N) > maxPayload {
		return nil, fmt.Errorf("buffer size %d out of range", p.N)
	}
	nonce := rand.Uint32() | 1
	b := &Buffer{rank: p.Rank, peers: make([][]byte, p.Size), segs: make([]*segment, p.Size)}
	// A rank that cannot make its segment still takes part in the
	// exchange, so that every rank fails alike instead of waiting.
	seg, cerr := createSegment(p.N, nonce)
	var rec [RecordSize]byte
	binary.LittleEndian.PutUint32(rec[0:], bufMagic)
	key := hostKey()
	if cerr != nil {
		rec[22] = 1
	} else {
		b.seg, b.mem = seg, seg.data(p.N)
		binary.LittleEndian.PutUint32(rec[4:], nonce)
		binary.LittleEndian.PutUint64(rec[8:], uint64(p.N))
		binary.LittleEndian.PutUint32(rec[16:], uint32(os.Getpid()))
		name := seg.name()
		rec[21] = byte(len(name))
		copy(rec[32:64], key[:])
		copy(rec[64:], name)
	}
	all, err := p.Exchange(ctx, rec[:])
	if err == nil && len(all) != p.Size*RecordSize {
		err = fmt.Errorf("buffer exchange returned %d bytes, want %d", len(all), p.Size*RecordSize)
	}
	if err == nil && cerr != nil {
		err = cerr
	}
	for r := 0; err == nil && r < p.Size; r++ {
		if all[r*RecordSize+22] != 0 {
			err = fmt.Errorf("rank %d could not allocate its buffer", r)
		}
	}
	if err != nil {
		b.release()
		return nil, err
	}
	mapped := true
	for r := range p.Size {
		if r == p.Rank {
			b.peers[r] = b.mem
			continue
		}
		s, n, err := openPeerBuffer(all[r*RecordSize:(r+1)*RecordSize], key, p.Local)
		if err != nil {
			mapped = false
			continue
		}
		b.segs[r], b.peers[r] = s, s.data(n)
	}
	// Tell the others whether this rank maps them all; the exchange is
	// also the barrier after which the names may go.
	var ok [RecordSize]byte
	binary.LittleEndian.PutUint32(ok[0:], bufMagic)
	if mapped {
		ok[4] = 1
	}
	all, err = p.Exchange(ctx, ok[:])
	if err == nil && len(all) != p.Size*RecordSize {
		err = fmt.Errorf("buffer exchange returned %d bytes, want %d", len(all), p.Size*RecordSize)
	}
	b.seg.unlink()
	if err != nil {
		b.release()
		return nil, err
	}
	b.Shared = true
	for r := range p.Size {
		if all[r*RecordSize+4] != 1 {
			b.Shared = false
		}
	}
	return b, nil
}

var errNotLocal = errors.New("not in this memory domain")

// openPeerBuffer decodes a peer's record and maps its segment.
func openPeerBuffer(rec []byte, key [32]byte, local bool) (*segment, int, error) {
	if binary.LittleEndian.Uint32(rec[0:]) != bufMagic {
		return nil, 0, errors.New("bad magic")
	}
	nonce := binary.LittleEndian.Uint32(rec[4:])
	size := binary.LittleEndian.Uint64(rec[8:])
	if size > maxPayload {
		return nil, 0, fmt.Errorf("size %d too large", size)
	}
	if rec[21] > 64 {
		return nil, 0, errors.New("bad segment name length")
	}
	if local || !haveSegments || [32]byte(rec[32:64]) != key {
		return nil, 0, errNotLocal
	}
	name := string(rec[64 : 64+int(rec[21])])
	s, err := openSegment(name, int(size), nonce)
	if err != nil {
		return nil, 0, err
	}
	return s, int(size), nil
}

// Bytes returns this rank's memory.
func (b *Buffer) Bytes() []byte { return b.mem }

// Peer returns rank r's memory as mapped in this process, or nil.
func (b *Buffer) Peer(r int) []byte {
	if r < 0 || r >= len(b.peers) {
		return nil
	}
	return b.peers[r]
}

// Holds reports whether p lies inside this rank's memory, and where.
func (b *Buffer) Holds(p []byte) (off int, ok bool) {
	if len(p) == 0 || len(b.mem) == 0 {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(b.mem)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	if at < base || at-base > uintptr(len(b.mem)) || uintptr(len(p)) > uintptr(len(b.mem))-(at-base) {
		return 0, false
	}
	return int(at - base), true
}

// Close unmaps this rank's buffer and its mappings of the peers'. The
// memory must not be used afterwards.
func (b *Buffer) Close() { b.release() }

func (b *Buffer) release() {
	for r, s := range b.segs {
		if s != nil {
			s.unmap()
			b.segs[r] = nil
		}
	}
	for r := range b.peers {
		b.peers[r] = nil
	}
	if b.seg != nil {
		b.seg.unlink()
		b.seg.unmap()
		b.seg = nil
	}
	b.mem = nil
}

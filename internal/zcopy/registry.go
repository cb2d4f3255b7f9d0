// Package zcopy is the zero-copy path of collectives on registered memory
// (hcomm's Comm.Alloc): a registry of a communicator's shared buffers, the
// per-call records that tell the ranks where each one's input and output
// lie, and the moves that read and write the peers' mappings directly.
//
// A call is a candidate (Candidate) when the communicator has live
// buffers and the call is large enough; every rank decides that alike
// from the call and from the collective Alloc and Free. Candidates then
// exchange one small record per rank (which buffer and offset holds the
// call's input and output, never an address); when every buffer the
// collective reads from is registered and mapped everywhere, each rank
// pulls what it needs from the peers' mappings into its own output — the
// copy-only collectives with a single copy, the reductions reading every
// rank's input in place; in a two-rank AllGather whose outputs are both
// registered each rank pushes its block into both outputs instead
// (push) — and the ranks
// exchange a second record (done),
// after which no rank touches another's memory for this call (the rooted
// collectives exchange one record each way between the root and each
// other rank instead: see Begin). Otherwise
// the call runs its ordinary program: the records were the first messages
// of the call, so the ranks stay in step.
package zcopy

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/hcomm-go/hcomm/internal/copyeng"
	"github.com/hcomm-go/hcomm/internal/rma"
	"github.com/hcomm-go/hcomm/internal/storepick"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Buf is one registered buffer of a communicator.
type Buf struct {
	B     *rma.Buffer
	ID    uint32 // the same on every rank (Alloc is collective)
	Freed atomic.Bool
	base  uintptr // this rank's memory's address (0: empty)
}

// Registry holds a communicator's live buffers and the zero-copy path's
// reusable exchange space. Collectives hold Mu shared, Alloc and Free
// exclusive; the per-call space is used by one collective at a time (the
// communicator runs one at a time).
type Registry struct {
	Mu     sync.RWMutex
	byID   []*Buf // ascending ids
	byAddr []*Buf // shared non-empty buffers by ascending base address
	ids    uint32
	live   atomic.Int32  // len(byID): agreed by every rank between calls
	Hits   atomic.Uint64 // calls that took the zero-copy path (tests)
	Moves  atomic.Uint64 // rounds that found this rank on a lower rank's CPU (moveApart)
	// Split, if set, splits large copies over the copy engine.
	Split *copyeng.Splitter

	size int
	mine []byte // size records: what this rank sends to each rank
	all  []byte // size records: what each rank sent here
	recs []record
	dsts [][]byte  // a pushed AllGather's destinations, while it runs (push)
	red  reduction // the call's reduction, while it runs
	// ntMin is the least block the running call writes around the
	// caches (Finish sets it).
	ntMin int
	picks storepick.Set // the stores of large AllGathers and AllToAlls, by timing (stores.go)
	// abandonFP is the fingerprint of abandon's records (setAbandonFP).
	abandonFP  wire.Fingerprint
	lingerFor  time.Duration // the running call's polling budget (linger)
	lingerMiss int           // polls in a row that ended without the record
	lingerSkip int           // waits left that block without polling
	ph         phases        // the stamps of the running call (zcopyphase builds)
}

// Live returns the number of live buffers.
func (r *Registry) Live() int { return int(r.live.Load()) }

// Add registers b as the next buffer of a communicator of size ranks. The
// caller holds Mu.
func (r *Registry) Add(size int, b *rma.Buffer) *Buf {
	r.ids++
	x := &Buf{B: b, ID: r.ids}
	if m := b.Bytes(); len(m) > 0 {
		x.base = uintptr(unsafe.Pointer(unsafe.SliceData(m)))
	}
	r.byID = append(r.byID, x)
	if b.Shared && x.base != 0 {
		i := len(r.byAddr)
		for i > 0 && r.byAddr[i-1].base > x.base {
			i--
		}
		r.byAddr = append(r.byAddr, nil)
		copy(r.byAddr[i+1:], r.byAddr[i:])
		r.byAddr[i] = x
	}
	r.live.Store(int32(len(r.byID)))
	if r.all == nil {
		r.size = size
		r.mine = make([]byte, size*RecSize)
		r.all = make([]byte, size*RecSize)
		r.recs = make([]record, size)
		r.dsts = make([][]byte, 0, size)
	}
	return x
}

// Release drops x and unmaps its memory (once). The caller holds Mu.
func (r *Registry) Release(x *Buf) {
	if x.Freed.Swap(true) {
		return
	}
	r.phaseFlush()
	r.byID = remove(r.byID, x)
	r.byAddr = remove(r.byAddr, x)
	r.live.Store(int32(len(r.byID)))
	x.B.Close()
}

// ReleaseAll releases every live buffer (the communicator closes).
func (r *Registry) ReleaseAll() {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	for len(r.byID) > 0 {
		r.Release(r.byID[0])
	}
}

func remove(s []*Buf, x *Buf) []*Buf {
	for i, y := range s {
		if y == x {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}

// find returns the id of the shared buffer holding p and p's offset in it
// (id 0: none), by a binary search over the buffers' addresses.
func (r *Registry) find(p []byte) (id uint32, off int) {
	if len(p) == 0 {
		return 0, 0
	}
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	// The last buffer starting at or below at is the only one that can
	// hold p: registered buffers do not overlap.
	lo, hi := 0, len(r.byAddr)
	for lo < hi {
		m := int(uint(lo+hi) / 2)
		if r.byAddr[m].base <= at {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0, 0
	}
	b := r.byAddr[lo-1]
	if o, ok := b.B.Holds(p); ok {
		return b.ID, o
	}
	return 0, 0
}

// byIDs returns the live buffer with id, or nil, by a binary search.
func (r *Registry) byIDs(id uint32) *Buf {
	lo, hi := 0, len(r.byID)
	for lo < hi {
		m := int(uint(lo+hi) / 2)
		switch b := r.byID[m]; {
		case b.ID == id:
			return b
		case b.ID < id:
			lo = m + 1
		default:
			hi = m
		}
	}
	return nil
}

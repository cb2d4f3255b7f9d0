package copyeng

import (
	"sync/atomic"
)

// ring is a bounded multi-producer multi-consumer queue of descriptors after
// Dmitry Vyukov's design: every cell carries a sequence number that says
// whose turn it is. A producer claims the position enq by a compare-and-swap
// when cell enq%n has sequence enq (free for this lap), writes the pointer
// and publishes it by storing sequence enq+1. A consumer claims position deq
// when cell deq%n has sequence deq+1 (filled), takes the pointer and frees
// the cell for the next lap by storing sequence deq+n.
//
// The sequence store is the publication: a consumer that loads sequence
// enq+1 (an atomic load, ordered after the producer's atomic store) sees the
// pointer written before it, and so everything the producer wrote into the
// descriptor before submitting it. The same holds for the freeing store and
// the next lap's producer.
type ring struct {
	_     [64]byte
	enq   atomic.Uint64
	_     [56]byte
	deq   atomic.Uint64
	_     [56]byte
	mask  uint64
	cells []cell
}

type cell struct {
	seq atomic.Uint64
	d   atomic.Pointer[Desc]
}

// newRing returns a ring of at least n cells (a power of two).
func newRing(n int) *ring {
	size := 2
	for size < n {
		size <<= 1
	}
	r := &ring{mask: uint64(size - 1), cells: make([]cell, size)}
	for i := range r.cells {
		r.cells[i].seq.Store(uint64(i))
	}
	return r
}

func (r *ring) cap() int { return len(r.cells) }

// push adds d and reports whether there was room.
func (r *ring) push(d *Desc) bool {
	pos := r.enq.Load()
	for {
		c := &r.cells[pos&r.mask]
		seq := c.seq.Load()
		switch dif := int64(seq - pos); {
		case dif == 0:
			if r.enq.CompareAndSwap(pos, pos+1) {
				d.pos = pos
				c.d.Store(d)
				c.seq.Store(pos + 1)
				return true
			}
			pos = r.enq.Load()
		case dif < 0:
			return false // full: the cell still holds the previous lap's entry
		default:
			pos = r.enq.Load()
		}
	}
}

// pop takes the oldest descriptor, or returns nil when the ring is empty.
// Before claiming a position it stores a lower bound of that position in
// *claim, so that fences can tell which positions may still be running.
func (r *ring) pop(claim *atomic.Uint64) *Desc {
	pos := r.deq.Load()
	for {
		c := &r.cells[pos&r.mask]
		seq := c.seq.Load()
		switch dif := int64(seq - (pos + 1)); {
		case dif == 0:
			claim.Store(pos)
			if r.deq.CompareAndSwap(pos, pos+1) {
				d := c.d.Load()
				c.d.Store(nil)
				c.seq.Store(pos + r.mask + 1)
				return d
			}
			pos = r.deq.Load()
		case dif < 0:
			return nil // empty
		default:
			pos = r.deq.Load()
		}
	}
}

// empty reports whether no filled cell waits at the consumer position.
func (r *ring) empty() bool {
	pos := r.deq.Load()
	return r.cells[pos&r.mask].seq.Load() != pos+1
}

// full reports whether the cell at the producer position still holds the
// previous lap's descriptor.
func (r *ring) full() bool {
	pos := r.enq.Load()
	return int64(r.cells[pos&r.mask].seq.Load()-pos) < 0
}

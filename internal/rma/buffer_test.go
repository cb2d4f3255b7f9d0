package rma

import (
	"context"
	"sync"
	"testing"
)

// A peer's buffer record is untrusted: decoding it never panics, and a
// record from another memory domain (or a forced local buffer) maps
// nothing.
func FuzzBufferRecord(f *testing.F) {
	var rec [RecordSize]byte
	rec[0], rec[1], rec[2], rec[3] = 0x52, 0x42, 0x55, 0x46
	rec[21] = 20
	copy(rec[64:], "hcomm-win-1-00000000")
	f.Add(rec[:])
	f.Add(make([]byte, RecordSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < RecordSize {
			return
		}
		var key [32]byte // no real host has it
		key[0] = 1
		if s, _, err := openPeerBuffer(b, key, false); err == nil {
			s.unmap()
			if [32]byte(b[32:64]) != key {
				t.Fatal("mapped a buffer of another memory domain")
			}
		}
		if _, _, err := openPeerBuffer(b, key, true); err == nil {
			t.Fatal("a forced local buffer mapped a peer")
		}
	})
}

// Buffers of ranks in one process map each other; the segment names are
// gone once NewBuffer returns.
func TestBufferLocal(t *testing.T) {
	const n = 3
	ex := newExchanger(n)
	bufs := make([]*Buffer, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			b, err := NewBuffer(context.Background(), BufferParams{Rank: r, Size: n, N: 1000 * (r + 1),
				Exchange: func(ctx context.Context, rec []byte) ([]byte, error) { return ex.exchange(r, rec), nil }})
			if err != nil {
				t.Error(err)
				return
			}
			bufs[r] = b
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for r, b := range bufs {
		if !b.Shared {
			t.Errorf("rank %d: not shared", r)
		}
		b.Bytes()[0] = byte(r + 1)
	}
	for r, b := range bufs {
		for p := range n {
			m := b.Peer(p)
			if len(m) != 1000*(p+1) || m[0] != byte(p+1) {
				t.Errorf("rank %d sees rank %d's buffer as %d bytes starting %d", r, p, len(m), m[0])
			}
		}
		if off, ok := b.Holds(b.Bytes()[10:20]); !ok || off != 10 {
			t.Errorf("Holds of a sub-slice: %d, %v", off, ok)
		}
		if _, ok := b.Holds(make([]byte, 10)); ok {
			t.Errorf("Holds of foreign memory")
		}
		if _, ok := b.Holds(b.Peer((r + 1) % n)); ok {
			t.Errorf("Holds of a peer's mapping")
		}
	}
	for _, b := range bufs {
		b.Close()
		if b.Bytes() != nil || b.Peer(0) != nil {
			t.Error("Close left memory")
		}
	}
}

// exchanger is an in-process all-gather of records.
type exchanger struct {
	mu    sync.Mutex
	cond  *sync.Cond
	n     int
	round []int
	recs  map[int][]byte
}

func newExchanger(n int) *exchanger {
	e := &exchanger{n: n, round: make([]int, n), recs: map[int][]byte{}}
	e.cond = sync.NewCond(&e.mu)
	return e
}

func (e *exchanger) exchange(r int, rec []byte) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := e.round[r]
	e.round[r]++
	all, ok := e.recs[k]
	if !ok {
		all = make([]byte, e.n*len(rec))
		e.recs[k] = all
	}
	copy(all[r*len(rec):], rec)
	e.cond.Broadcast()
	for {
		done := true
		for p := range e.n {
			if e.round[p] <= k {
				done = false
			}
		}
		if done {
			out := make([]byte, len(all))
			copy(out, all)
			return out
		}
		e.cond.Wait()
	}
}

package sched

import (
	"math/rand/v2"
	"testing"
)

// TestBufferModel checks dense and treap buffers against a plain slice of
// cells under random writes and reads.
func TestBufferModel(t *testing.T) {
	for _, n := range []int{1, 50, denseMax, denseMax + 1, 3 * denseMax} {
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		a := newRunArena()
		b := a.newBuffer(n, run{idx: 10, set: 5})
		model := make([]cell, n)
		for i := range model {
			model[i] = cell{10 + i, 5}
		}
		var got []run
		for range 3000 {
			lo := rng.IntN(n)
			l := 1 + rng.IntN(min(n-lo, 1+rng.IntN(300)))
			// A region of a few random runs, some undefined.
			var rs []run
			for off := 0; off < l; {
				k := 1 + rng.IntN(l-off)
				set := setID(rng.IntN(4))
				rs = append(rs, run{off: off, n: k, idx: rng.IntN(1000), set: set})
				off += k
			}
			a.write(&b, lo, rs)
			for _, r := range rs {
				for k := range r.n {
					c := cell{r.idx + k, r.set}
					if r.set == undefined {
						c = cell{}
					}
					model[lo+r.off+k] = c
				}
			}
			lo = rng.IntN(n)
			l = rng.IntN(n - lo + 1)
			got = a.read(&b, lo, l, got[:0])
			checkRuns(t, got, model[lo:lo+l])
		}
		checkRuns(t, a.read(&b, 0, n, got[:0]), model)
	}
}

// checkRuns checks that rs is a canonical run list for cells.
func checkRuns(t *testing.T, rs []run, cells []cell) {
	t.Helper()
	pos := 0
	for i, r := range rs {
		if r.off != pos || r.n <= 0 {
			t.Fatalf("run %d = %+v, want it at %d and non-empty", i, r, pos)
		}
		if i > 0 {
			p := rs[i-1]
			if p.set == r.set && (r.set == undefined || p.idx+p.n == r.idx) {
				t.Fatalf("runs %+v and %+v should have been merged", p, r)
			}
		}
		for k := range r.n {
			want := cells[pos+k]
			if want.set != r.set || (r.set != undefined && want.idx != r.at(pos+k)) {
				t.Fatalf("element %d = (%d, %d), want (%d, %d)", pos+k, r.at(pos+k), r.set, want.idx, want.set)
			}
		}
		pos += r.n
	}
	if pos != len(cells) {
		t.Fatalf("runs cover %d elements, want %d", pos, len(cells))
	}
}

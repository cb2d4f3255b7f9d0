package algo

import (
	"math/bits"
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// TestDoubleTree checks the shape of dbtree's trees: each is a spanning
// binary tree of depth at most ⌊log2 n⌋, and no rank is inner in both.
func TestDoubleTree(t *testing.T) {
	for n := 1; n <= 300; n++ {
		trees := doubleTree(n)
		inner := make([]int, n)
		for ti, tr := range trees {
			if tr.parent[tr.root] != -1 {
				t.Fatalf("n=%d tree %d: root %d has parent %d", n, ti, tr.root, tr.parent[tr.root])
			}
			for r := range n {
				if len(tr.kids[r]) > 2 {
					t.Fatalf("n=%d tree %d: rank %d has %d kids", n, ti, r, len(tr.kids[r]))
				}
				if len(tr.kids[r]) > 0 {
					inner[r]++
				}
				for _, k := range tr.kids[r] {
					if tr.parent[k] != r {
						t.Fatalf("n=%d tree %d: kid %d of %d has parent %d", n, ti, k, r, tr.parent[k])
					}
				}
				depth, x := 0, r
				for x != tr.root {
					x = tr.parent[x]
					depth++
					if x < 0 || depth > bits.Len(uint(n))-1 {
						t.Fatalf("n=%d tree %d: rank %d is too deep or detached", n, ti, r)
					}
				}
			}
		}
		for r, c := range inner {
			if c > 1 {
				t.Fatalf("n=%d: rank %d is inner in both trees", n, r)
			}
		}
	}
}

// TestStepCounts checks the step counts of the schedules: no more than
// their messages on the critical path (the cost functions' α), where a step
// may hold only local copies. Root n/2 has no range that wraps past rank
// n−1 in Gather and Scatter binomial, which would add a step of copies.
func TestStepCounts(t *testing.T) {
	log2 := func(n int) int { return bits.Len(uint(n - 1)) } // ⌈log2 n⌉
	tests := []struct {
		coll sched.Coll
		algo string
		max  func(n int) int
	}{
		{sched.AllReduce, "ring", func(n int) int { return 2 * (n - 1) }},
		{sched.AllReduce, "rd", func(n int) int { return log2(n) + 2 }},
		{sched.AllReduce, "hd", func(n int) int { return 2*log2(n) + 2 }},
		{sched.AllReduce, "dbtree", func(n int) int { return 4*log2(n) + 4 }},
		{sched.Reduce, "binomial", func(n int) int { return log2(n) }},
		{sched.Reduce, "chain", func(n int) int { return 1 }},
		{sched.Broadcast, "binomial", func(n int) int { return log2(n) }},
		{sched.Broadcast, "sag", func(n int) int { return log2(n) + n - 1 }},
		{sched.AllGather, "ring", func(n int) int { return max(1, n-1) }},
		{sched.AllGather, "bruck", func(n int) int { return log2(n) + 1 }},
		{sched.AllGather, "rd", func(n int) int { return log2(n) + 1 }},
		{sched.ReduceScatter, "pairwise", func(n int) int { return n - 1 }},
		{sched.AllToAll, "bruck", func(n int) int { return 2*log2(n) + 1 }},
		{sched.ReduceScatter, "rh", func(n int) int { return log2(n) + 2 }},
		{sched.Gather, "binomial", func(n int) int { return max(1, log2(n)) }},
		{sched.Scatter, "binomial", func(n int) int { return max(1, log2(n)) }},
		{sched.Barrier, "dissemination", func(n int) int { return log2(n) }},
	}
	for _, tt := range tests {
		a, _ := Lookup(tt.coll, tt.algo)
		for _, n := range []int{1, 2, 3, 7, 8, 13, 64, 100} {
			s := sched.Uniform(tt.coll, n, 3*n+1, n/2, false)
			if tt.coll == sched.Barrier {
				s = sched.Spec{Coll: tt.coll, N: n}
			}
			for _, p := range buildAll(t, a, s) {
				if len(p.Steps) > max(1, tt.max(n)) {
					t.Errorf("%s %s n=%d: rank %d has %d steps, want at most %d", tt.coll, tt.algo, n, p.Rank, len(p.Steps), max(1, tt.max(n)))
				}
			}
		}
	}
}

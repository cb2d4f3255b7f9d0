package zcopy

import (
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
)

func TestOrdinary(t *testing.T) {
	const k, m = 1 << 10, 1 << 20
	for _, tc := range []struct {
		c    sched.Coll
		size int
		n    int
		want bool
	}{
		{sched.Broadcast, 2, 256 * k, true},
		{sched.Broadcast, 2, 2 * m, true},
		{sched.Broadcast, 2, 8*m - 1, true},
		{sched.Broadcast, 2, 8 * m, false},
		{sched.Broadcast, 3, 2 * m, false},
		{sched.AllGather, 2, 512 * k, false},
		{sched.AllGather, 2, m, false},
		{sched.AllGather, 2, 2 * m, false},
		{sched.AllGather, 4, 2 * m, false},
		// Four ranks: the zero-copy path at every size measured.
		{sched.AllGather, 4, 8 * m, false},
		{sched.Broadcast, 4, 512 * k, false},
		{sched.Broadcast, 4, 2 * m, false},
		{sched.AllToAll, 4, 512 * k, false},
		{sched.AllToAll, 4, 8 * m, false},
		{sched.ReduceScatter, 4, 512 * k, false},
		{sched.AllToAll, 2, 2 * m, false},
		{sched.AllToAll, 2, 8 * m, false},
		{sched.ReduceScatter, 2, 2 * m, false},
		{sched.AllReduce, 2, 2 * m, false},
		{sched.Gather, 2, 2 * m, false},
	} {
		if got := Ordinary(tc.c, tc.size, tc.n); got != tc.want {
			t.Errorf("Ordinary(%v, %d ranks, %d bytes) = %v, want %v", tc.c, tc.size, tc.n, got, tc.want)
		}
	}
}

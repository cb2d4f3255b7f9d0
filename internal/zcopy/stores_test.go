package zcopy

import (
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// TestStorePickFor checks which calls choose their stores by timing.
func TestStorePickFor(t *testing.T) {
	out := func(n int) []byte { return make([]byte, n) }
	var r Registry
	for _, tc := range []struct {
		name string
		k    Call
		size int
		want bool
	}{
		{"allgather 8 MiB", Call{Coll: sched.AllGather, Out: out(8 << 20)}, 2, true},
		{"alltoall 16 MiB", Call{Coll: sched.AllToAll, Out: out(16 << 20)}, 2, true},
		{"blocks below the threshold", Call{Coll: sched.AllGather, Out: out(8 << 20)}, 4, false},
		{"larger than the caches", Call{Coll: sched.AllGather, Out: out(pickMax + 2<<20)}, 2, false},
		{"broadcast", Call{Coll: sched.Broadcast, Out: out(8 << 20)}, 2, false},
		{"allreduce", Call{Coll: sched.AllReduce, Out: out(8 << 20)}, 2, false},
	} {
		if got := r.storePick(&tc.k, tc.size) != nil; got != tc.want {
			t.Errorf("%s: chosen by timing %v, want %v", tc.name, got, tc.want)
		}
	}
}

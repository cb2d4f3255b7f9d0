package algo

import (
	"path/filepath"
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/sched/schedtest"
)

// TestGolden pins small programs. Run with -update (or HCOMM_UPDATE_GOLDEN=1)
// to rewrite the files after an intended change, and review the diff.
func TestGolden(t *testing.T) {
	tests := []struct {
		file string
		coll sched.Coll
		algo string
		spec sched.Spec
	}{
		{"allreduce_ring_n4.txt", sched.AllReduce, "ring", sched.Uniform(sched.AllReduce, 4, 10, 0, false)},
		{"allreduce_ring_n4_inplace.txt", sched.AllReduce, "ring", sched.Uniform(sched.AllReduce, 4, 10, 0, true)},
		{"allreduce_rd_n5.txt", sched.AllReduce, "rd", sched.Uniform(sched.AllReduce, 5, 8, 0, false)},
		{"allreduce_hd_n6.txt", sched.AllReduce, "hd", sched.Uniform(sched.AllReduce, 6, 9, 0, false)},
		{"allreduce_dbtree_n5.txt", sched.AllReduce, "dbtree", sched.Uniform(sched.AllReduce, 5, 8, 0, false)},
		{"allgather_bruck_n5.txt", sched.AllGather, "bruck", sched.Uniform(sched.AllGather, 5, 2, 0, false)},
		{"allgather_rd_n4.txt", sched.AllGather, "rd", sched.Spec{Coll: sched.AllGather, N: 4, Counts: []int{1, 2, 0, 3}}},
		{"allgather_rd_n8_inplace.txt", sched.AllGather, "rd", sched.Uniform(sched.AllGather, 8, 1, 0, true)},
		{"reducescatter_pairwise_n3.txt", sched.ReduceScatter, "pairwise", sched.Spec{Coll: sched.ReduceScatter, N: 3, Counts: []int{2, 1, 2}}},
		{"reducescatter_pairwise_n4_inplace.txt", sched.ReduceScatter, "pairwise", sched.Uniform(sched.ReduceScatter, 4, 2, 0, true)},
		{"alltoall_bruck_n5.txt", sched.AllToAll, "bruck", sched.Uniform(sched.AllToAll, 5, 1, 0, false)},
		{"alltoall_bruck_n4_inplace.txt", sched.AllToAll, "bruck", sched.Uniform(sched.AllToAll, 4, 2, 0, true)},
		{"reducescatter_rh_n5_inplace.txt", sched.ReduceScatter, "rh", sched.Spec{Coll: sched.ReduceScatter, N: 5, InPlace: true, Counts: []int{2, 0, 3, 1, 2}}},
		{"alltoall_pairwise_n4_inplace.txt", sched.AllToAll, "pairwise", sched.Uniform(sched.AllToAll, 4, 2, 0, true)},
		{"gather_binomial_n6_root4.txt", sched.Gather, "binomial", sched.Uniform(sched.Gather, 6, 2, 4, false)},
		{"gather_binomial_n6_root2.txt", sched.Gather, "binomial", sched.Uniform(sched.Gather, 6, 2, 2, false)},
		{"scatter_binomial_n6_root2_inplace.txt", sched.Scatter, "binomial", sched.Uniform(sched.Scatter, 6, 2, 2, true)},
		{"alltoall_pairwise_n6_inplace.txt", sched.AllToAll, "pairwise", sched.Uniform(sched.AllToAll, 6, 1, 0, true)},
		{"broadcast_sag_n5_root2.txt", sched.Broadcast, "sag", sched.Uniform(sched.Broadcast, 5, 7, 2, false)},
		{"barrier_dissemination_n5.txt", sched.Barrier, "dissemination", sched.Spec{Coll: sched.Barrier, N: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			a, ok := Lookup(tt.coll, tt.algo)
			if !ok {
				t.Fatalf("no %s %s", tt.coll, tt.algo)
			}
			progs := buildAll(t, a, tt.spec)
			if err := sched.Verify(tt.spec, progs); err != nil {
				t.Fatal(err)
			}
			schedtest.Golden(t, filepath.Join("testdata", tt.file), sched.FormatAll(progs))
		})
	}
}

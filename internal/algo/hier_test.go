package algo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/sched/schedtest"
)

// layout places sizes[h] ranks on host h, consecutively or, if interleave,
// round-robin across hosts (mpirun --map-by node).
func layout(sizes []int, interleave bool) Layout {
	l := Layout{Hosts: make([][]int, len(sizes))}
	r := 0
	if !interleave {
		for h, s := range sizes {
			for range s {
				l.Hosts[h] = append(l.Hosts[h], r)
				r++
			}
		}
		return l
	}
	left := slices.Clone(sizes)
	for more := true; more; {
		more = false
		for h := range left {
			if left[h] > 0 {
				l.Hosts[h] = append(l.Hosts[h], r)
				r++
				left[h]--
				more = true
			}
		}
	}
	return l
}

// shapes is the generated family: hosts 1..16 × ranks per host 1..8, each
// even shape consecutive and interleaved, plus uneven hosts.
func shapes(rng *rand.Rand, short bool) []Layout {
	var out []Layout
	for h := 1; h <= 16; h++ {
		for l := 1; l <= 8; l++ {
			if short && h*l > 32 {
				continue
			}
			sizes := make([]int, h)
			for i := range sizes {
				sizes[i] = l
			}
			out = append(out, layout(sizes, false))
			if h > 1 && l > 1 {
				out = append(out, layout(sizes, true))
			}
			if h > 1 {
				uneven := make([]int, h)
				for i := range uneven {
					uneven[i] = 1 + rng.IntN(l+1)
				}
				out = append(out, layout(uneven, rng.IntN(2) == 0))
			}
		}
	}
	return out
}

func TestVerifyLayouts(t *testing.T) {
	rng := newRand(12)
	family := shapes(rng, testing.Short() || raceEnabled)
	for _, name := range []string{"AllReduce/hring", "AllReduce/hier", "AllGather/hring", "ReduceScatter/hring", "Broadcast/hier", "Barrier/hier",
		"AllReduce/leader", "AllGather/hier", "ReduceScatter/hier", "Reduce/hier",
		"AllReduce/rail", "Barrier/rail", "AllGather/leader", "ReduceScatter/leader", "AllToAll/leader", "ReduceScatter/pipe"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rng := newRand(uint64(len(name)))
			for _, l := range family {
				n := len(l.Order())
				var a Algorithm
				for _, x := range ForLayout(l) {
					if x.Coll.String()+"/"+x.Name == name {
						a = x
					}
				}
				ss := specs(a.Coll, n, rng)
				large := 24
				if raceEnabled {
					// Under the race detector (CI), the shapes past
					// 12 ranks get the large shapes' specs.
					large = 12
				}
				if n > large {
					// Large shapes: one count just past a multiple of
					// n (every block boundary differs), alternating
					// in place where the collective has an in-place
					// form (Broadcast has none), or unequal counts.
					ss = ss[:0]
					for _, s := range specs(a.Coll, n, rng) {
						inPlace := s.InPlace == (n%2 == 0) || a.Coll == sched.Broadcast
						if s.Coll == sched.Barrier || s.Count(0) == n+1 && inPlace && s.Root == 0 {
							ss = append(ss, s)
						}
						if s.Coll == sched.AllToAll && len(ss) == 0 && a.Supports(s) {
							ss = append(ss, s) // one uniform matrix
						}
					}
				}
				if a.Coll.Rooted() {
					// Every call of a rooted collective once with the
					// root a host's first rank and once with it inside
					// a host (another leader, another tree).
					var rooted []sched.Spec
					for _, s := range ss {
						if s.Root != 0 {
							continue // specs' own roots: replaced here
						}
						for _, root := range layoutRoots(l, rng) {
							s.Root = root
							rooted = append(rooted, s)
						}
					}
					ss = rooted
				}
				verified := 0
				for _, s := range ss {
					if !a.Supports(s) {
						continue // the leader AllToAll: uniform matrices only
					}
					if err := sched.Verify(s, buildAll(t, a, s)); err != nil {
						t.Fatalf("layout %v: %s root %d: %v", l.Hosts, describe(s), s.Root, err)
					}
					verified++
				}
				if verified == 0 {
					t.Fatalf("layout %v: no call verified", l.Hosts)
				}
			}
		})
	}
}

// layoutRoots returns the roots a rooted collective is verified with on l:
// a host's first rank (host 0's when there is one host) and a rank past
// the first on its host, each on a random host.
func layoutRoots(l Layout, rng *rand.Rand) []int {
	roots := []int{l.Hosts[rng.IntN(len(l.Hosts))][0]}
	var inner []int
	for _, rs := range l.Hosts {
		inner = append(inner, rs[1:]...)
	}
	if len(inner) > 0 {
		roots = append(roots, inner[rng.IntN(len(inner))])
	}
	return roots
}

// TestLayoutCrossings checks the point of the layout algorithms: the ring
// orders cross each host boundary once, and hier sends each rank's share
// of the inter-host traffic only to the same local rank of other hosts.
func TestLayoutCrossings(t *testing.T) {
	l := layout([]int{4, 4, 4}, true) // ranks 0,3,6,9 on host 0, …
	hostOf := map[int]int{}
	for h, rs := range l.Hosts {
		for _, r := range rs {
			hostOf[r] = h
		}
	}
	s := sched.Uniform(sched.AllReduce, 12, 1200, 0, false)
	for _, tt := range []struct {
		name      string
		a         Algorithm
		crossings int // ranks that send to another host
	}{
		{"flat ring", mustLookup(t, "ring"), 12},
		{"hring", layoutAlgo(t, l, "hring"), 3},
		{"hier", layoutAlgo(t, l, "hier"), 12},
	} {
		progs := buildAll(t, tt.a, s)
		senders := 0
		interBytes := 0
		for _, p := range progs {
			sends := false
			for _, st := range p.Steps {
				for _, op := range st.Ops {
					if to, ok := op.Sends(); ok && hostOf[to] != hostOf[p.Rank] {
						sends = true
						interBytes += op.Len()
					}
				}
			}
			if sends {
				senders++
			}
		}
		if senders != tt.crossings {
			t.Errorf("%s: %d ranks send across hosts, want %d", tt.name, senders, tt.crossings)
		}
		t.Logf("%s: %d elements cross hosts", tt.name, interBytes)
		if tt.name == "hier" && interBytes != 2*2*1200 {
			// 3 hosts: each of 4 rails of 300 elements is allreduced
			// around 3 hosts: 2·(3−1)/3·300·3 ranks = 1200 per rail.
			t.Errorf("hier moves %d elements across hosts, want %d", interBytes, 4*1200)
		}
	}
}

func mustLookup(t *testing.T, name string) Algorithm {
	a, ok := Lookup(sched.AllReduce, name)
	if !ok {
		t.Fatal(name)
	}
	return a
}

func layoutAlgo(t *testing.T, l Layout, name string) Algorithm {
	for _, a := range ForLayout(l) {
		if a.Coll == sched.AllReduce && a.Name == name {
			return a
		}
	}
	t.Fatal(name)
	return Algorithm{}
}

func TestLayoutErrors(t *testing.T) {
	for _, l := range []Layout{{Hosts: [][]int{{0, 1}, {1}}}, {Hosts: [][]int{{0}, {}}}, {Hosts: [][]int{{0, 3}}}, {Hosts: [][]int{{0}}}} {
		for _, a := range ForLayout(l) {
			s := sched.Uniform(a.Coll, 2, 4, 0, false)
			if a.Coll == sched.Barrier {
				s = sched.Spec{Coll: a.Coll, N: 2}
			}
			if _, err := a.Build(s, 0); err == nil {
				t.Errorf("%s %s built on layout %v", a.Coll, a.Name, l.Hosts)
			}
		}
	}
}

func TestGoldenLayouts(t *testing.T) {
	tests := []struct {
		file  string
		sizes []int
		inter bool
		algo  string
		spec  sched.Spec
	}{
		{"allreduce_hier_2x2.txt", []int{2, 2}, false, "hier", sched.Uniform(sched.AllReduce, 4, 8, 0, false)},
		{"allreduce_hier_3_1_2_interleaved.txt", []int{3, 1, 2}, true, "hier", sched.Uniform(sched.AllReduce, 6, 12, 0, true)},
		{"allreduce_hring_2x2_interleaved.txt", []int{2, 2}, true, "hring", sched.Uniform(sched.AllReduce, 4, 8, 0, false)},
		{"broadcast_hier_2x3_root4.txt", []int{3, 3}, false, "hier", sched.Uniform(sched.Broadcast, 6, 5, 4, false)},
		{"barrier_hier_3x2.txt", []int{2, 2, 2}, false, "hier", sched.Spec{Coll: sched.Barrier, N: 6}},
		{"allreduce_leader_2x3.txt", []int{3, 3}, false, "leader", sched.Uniform(sched.AllReduce, 6, 4, 0, false)},
		{"reduce_hier_3_2_interleaved_root3.txt", []int{3, 2}, true, "hier", sched.Uniform(sched.Reduce, 5, 4, 3, false)},
		{"allgather_hier_3_1_2_interleaved.txt", []int{3, 1, 2}, true, "hier", sched.Uniform(sched.AllGather, 6, 2, 0, false)},
		{"reducescatter_hier_2_3_inplace.txt", []int{2, 3}, false, "hier", sched.Uniform(sched.ReduceScatter, 5, 2, 0, true)},
		{"allreduce_rail_2x2.txt", []int{2, 2}, false, "rail", sched.Uniform(sched.AllReduce, 4, 2, 0, false)},
		{"allreduce_rail_3_2_3_interleaved_inplace.txt", []int{3, 2, 3}, true, "rail", sched.Uniform(sched.AllReduce, 8, 2, 0, true)},
		{"barrier_rail_3_1_2.txt", []int{3, 1, 2}, false, "rail", sched.Spec{Coll: sched.Barrier, N: 6}},
		{"reducescatter_pipe_2x2_interleaved.txt", []int{2, 2}, true, "pipe", sched.Uniform(sched.ReduceScatter, 4, 5, 0, false)},
		{"reducescatter_leader_2x2.txt", []int{2, 2}, false, "leader", sched.Uniform(sched.ReduceScatter, 4, 2, 0, false)},
		{"reducescatter_leader_3_1_2_interleaved_inplace.txt", []int{3, 1, 2}, true, "leader", sched.Uniform(sched.ReduceScatter, 6, 2, 0, true)},
		{"alltoall_leader_2x2.txt", []int{2, 2}, false, "leader", sched.Uniform(sched.AllToAll, 4, 1, 0, false)},
		{"alltoall_leader_3_1_2_interleaved_inplace.txt", []int{3, 1, 2}, true, "leader", sched.Uniform(sched.AllToAll, 6, 1, 0, true)},
		{"allgather_leader_2x2.txt", []int{2, 2}, false, "leader", sched.Uniform(sched.AllGather, 4, 2, 0, false)},
		{"allgather_leader_3_1_2_interleaved_inplace.txt", []int{3, 1, 2}, true, "leader", sched.Uniform(sched.AllGather, 6, 2, 0, true)},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			l := layout(tt.sizes, tt.inter)
			var a Algorithm
			for _, x := range ForLayout(l) {
				if x.Coll == tt.spec.Coll && x.Name == tt.algo {
					a = x
				}
			}
			progs := buildAll(t, a, tt.spec)
			if err := sched.Verify(tt.spec, progs); err != nil {
				t.Fatal(err)
			}
			var hosts []string
			for h, rs := range l.Hosts {
				hosts = append(hosts, fmt.Sprintf("host %d: %v", h, rs))
			}
			schedtest.Golden(t, filepath.Join("testdata", tt.file), "# "+strings.Join(hosts, "; ")+"\n"+sched.FormatAll(progs))
		})
	}
}

func TestLayoutCost(t *testing.T) {
	lc := LinkCosts{Intra: Link{1e-6, 1 / 8e9}, Inter: Link{30e-6, 1 / 0.125e9}, Gamma: 1 / 8e9}
	const m = 64 << 20
	// 2 hosts × 2 ranks on 1 Gbit/s: the theory of the issue.
	inter := layout([]int{2, 2}, true)
	ratio := LayoutCost(sched.AllReduce, "ring", inter, m, lc) / LayoutCost(sched.AllReduce, "hring", inter, m, lc)
	if ratio < 1.9 || ratio > 2.1 {
		t.Errorf("interleaved 2×2: rank-order ring / hring = %.2f, want about 2 (a NIC shared by 2 edges)", ratio)
	}
	cons := layout([]int{2, 2}, false)
	ratio = LayoutCost(sched.AllReduce, "hring", cons, m, lc) / LayoutCost(sched.AllReduce, "hier", cons, m, lc)
	if ratio < 1.4 || ratio > 1.6 {
		t.Errorf("consecutive 2×2: hring / hier = %.2f, want about 1.5", ratio)
	}
	if got := ChooseAllReduce(cons, m, lc); got != "hier" {
		t.Errorf("2×2 at 64 MiB picks %s", got)
	}
	if got := ChooseAllReduce(FlatLayout(4), m, lc); got != "ring" {
		t.Errorf("one host picks %s", got)
	}
	// Small messages: the leader form's few steps win over the rails';
	// large ones the reverse.
	four := layout([]int{4, 4, 4, 4}, false)
	if got := ChooseAllReduce(four, 8, lc); got != "rail" {
		t.Errorf("4×4 at 8 B picks %s, want rail (no step inside a host before the exchange)", got)
	}
	crowded := lc
	crowded.Crowd = 2 // 4 hosts of 4 ranks as namespaces of 8-CPU machines
	if got := ChooseAllReduce(four, 8, crowded); got != "leader" {
		t.Errorf("4×4 at 8 B, 2 ranks per CPU, picks %s, want leader", got)
	}
	if got := ChooseAllReduce(four, 64<<10, lc); got != "leader" {
		t.Errorf("4×4 at 64 KiB picks %s, want leader", got)
	}
	if got := ChooseAllReduce(four, m, lc); got != "hier" {
		t.Errorf("4×4 at 64 MiB picks %s, want hier", got)
	}
	// The multi-rail AllGather and ReduceScatter move (H−1)/H of the
	// data through each NIC where the host-ordered ring moves (n−1)/n.
	for _, c := range []sched.Coll{sched.AllGather, sched.ReduceScatter} {
		ratio := LayoutCost(c, "hring", cons, m, lc) / LayoutCost(c, "hier", cons, m, lc)
		if ratio < 1.3 || ratio > 1.6 {
			t.Errorf("consecutive 2×2: %s hring / hier = %.2f, want about 1.5", c, ratio)
		}
	}
	// AllGather: the leader form's one message between hosts a step wins
	// for small calls, the multi-rail form's intra-host steps of a block
	// (not the whole vector) for large ones.
	for _, l := range []Layout{cons, inter} {
		if small, rail := LayoutCost(sched.AllGather, "leader", l, 64, lc), LayoutCost(sched.AllGather, "hier", l, 64, lc); small >= rail {
			t.Errorf("%v AllGather at 64 B: leader %.1f µs, hier %.1f µs", l.Hosts, small*1e6, rail*1e6)
		}
		if large, rail := LayoutCost(sched.AllGather, "leader", l, m, lc), LayoutCost(sched.AllGather, "hier", l, m, lc); large <= rail {
			t.Errorf("%v AllGather at 64 MiB: leader %.1f ms, hier %.1f ms", l.Hosts, large*1e3, rail*1e3)
		}
	}
	for _, a := range ForLayout(four) {
		if a.LinkCost == nil || a.LinkCost(m, lc) <= 0 || a.Cost != nil {
			t.Errorf("%s %s: LinkCost %v, Cost %v", a.Coll, a.Name, a.LinkCost != nil, a.Cost != nil)
		}
	}
	if !math.IsInf(LayoutCost(sched.Broadcast, "hring", cons, m, lc), 1) || math.IsInf(LayoutCost(sched.Barrier, "hier", cons, 0, lc), 1) {
		t.Error("Broadcast hring has a cost, or Barrier hier none")
	}
}

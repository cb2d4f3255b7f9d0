package plan

import (
	"testing"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/sched"
)

func TestLayoutChoice(t *testing.T) {
	consecutive := algo.Layout{Hosts: [][]int{{0, 1}, {2, 3}}}
	interleaved := algo.Layout{Hosts: [][]int{{0, 2}, {1, 3}}}
	tests := []struct {
		name   string
		layout *algo.Layout
		o      string
		coll   sched.Coll
		count  int
		want   string
	}{
		{"no layout", nil, "", sched.AllReduce, 16 << 20, "hd"},
		{"2x2 large", &consecutive, "", sched.AllReduce, 16 << 20, "hier"},
		// Halving-doubling's first round pairs r with r^2, on one host
		// here: what is left crosses with the same bytes per NIC as the
		// rails, so it costs what hier costs less hier's extra steps.
		{"2x2 interleaved large", &interleaved, "", sched.AllReduce, 16 << 20, "hd"},
		// The multi-rail forms move (H−1)/H of the data through a NIC,
		// the host-ordered ring (n−1)/n.
		{"interleaved allgather", &interleaved, "", sched.AllGather, 4 << 20, "hier"},
		// Recursive halving's first round stays in the host here, as
		// halving-doubling's does: it moves what the rails move through
		// a NIC in fewer messages. The pipelined rails move the same
		// bytes with the intra-host phase hidden behind the link.
		{"interleaved reducescatter", &interleaved, "", sched.ReduceScatter, 4 << 20, "pipe"},
		{"interleaved reducescatter small", &interleaved, "", sched.ReduceScatter, 32 << 10, "leader"},
		{"allgather forced hring", &interleaved, "allgather=hring", sched.AllGather, 4 << 20, "hring"},
		// Consecutively the binomial tree is the hierarchical one (1→0,
		// 3→2, then 2→0), and the flat algorithm wins the tie; placed
		// round robin, its first round sends two messages through one
		// NIC.
		{"reduce small", &consecutive, "", sched.Reduce, 8, "binomial"},
		{"reduce small interleaved", &interleaved, "", sched.Reduce, 8, "hier"},
		{"one host", &algo.Layout{Hosts: [][]int{{0, 1, 2, 3}}}, "", sched.AllGather, 4 << 20, "rd"},
		// Every rank exchanges with its peer on the other host at once,
		// then inside its host: one step fewer than through a leader.
		{"barrier", &consecutive, "", sched.Barrier, 0, "rail"},
		{"allreduce small", &consecutive, "", sched.AllReduce, 8, "rail"},
		{"allreduce small interleaved", &interleaved, "", sched.AllReduce, 8, "rail"},
		{"override", &consecutive, "allreduce=hring", sched.AllReduce, 8, "hring"},
		{"override without layout", nil, "allreduce=hier", sched.AllReduce, 8, "hier"},
		{"bare name", &consecutive, "hier", sched.Broadcast, 8, "hier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseOverrides(tt.o)
			if err != nil {
				t.Fatal(err)
			}
			p := New(0, 4, NetworkModel, o)
			if tt.layout != nil {
				if err := p.SetLayout(*tt.layout); err != nil {
					t.Fatal(err)
				}
			}
			s := sched.Uniform(tt.coll, 4, tt.count/4, 0, false)
			if tt.coll == sched.Barrier {
				s = sched.Spec{Coll: sched.Barrier, N: 4}
			}
			a, err := p.Choose(s, 4)
			if err != nil {
				t.Fatal(err)
			}
			if a.Name != tt.want {
				t.Errorf("chose %s, want %s", a.Name, tt.want)
			}
			if _, err := p.Program(s, 4); err != nil {
				t.Fatal(err)
			}
		})
	}
	// A slow link between hosts (1 Gbit/s, from the NIC or the topology
	// file) makes the rails worth their extra steps at a smaller size.
	p := New(0, 16, NetworkModel, nil)
	var hosts [][]int
	for h := range 4 {
		hosts = append(hosts, []int{4 * h, 4*h + 1, 4*h + 2, 4*h + 3})
	}
	if err := p.SetLayout(algo.Layout{Hosts: hosts}); err != nil {
		t.Fatal(err)
	}
	small := sched.Uniform(sched.AllReduce, 16, 16, 0, false)
	if a, _ := p.Choose(small, 4); a.Name != "rail" {
		t.Errorf("4×4 at 64 B picks %s, want rail", a.Name)
	}
	mid := sched.Uniform(sched.AllReduce, 16, 64<<10, 0, false)
	before, _ := p.Choose(mid, 4)
	p.SetInterLink(algo.Link{Alpha: NetworkModel.Alpha, Beta: 8 / 1e9})
	after, _ := p.Choose(mid, 4)
	if before.Name != "leader" || after.Name != "hier" {
		t.Errorf("4×4 at 256 KiB picks %s, and %s on 1 Gbit/s links; want leader, then hier", before.Name, after.Name)
	}
	// 2 × 2 on 10 Gbit/s links: each rail's message takes its turn on the
	// NIC, so the leader form (one message per host) stays the pick up to
	// 256 KiB, where it was measured 1.5–2.2× faster than the rails, and
	// the rails take over where their bytes count (BENCHMARKS.md).
	for _, tt := range []struct {
		count int
		want  string
	}{{64 << 10, "leader"}, {512 << 10, "hier"}} {
		p := New(0, 4, NetworkModel, nil)
		if err := p.SetLayout(algo.Layout{Hosts: [][]int{{0, 1}, {2, 3}}}); err != nil {
			t.Fatal(err)
		}
		p.SetInterLink(algo.Link{Alpha: NetworkModel.Alpha, Beta: 8 / 10e9})
		if a, _ := p.Choose(sched.Uniform(sched.AllReduce, 4, tt.count, 0, false), 4); a.Name != tt.want {
			t.Errorf("2×2 at 10 Gbit/s, %d KiB: picks %s, want %s", tt.count*4>>10, a.Name, tt.want)
		}
	}
	// ReduceScatter on 2 × 2 over 1 Gbit/s: the leader form while a
	// pipelined part's messages are short beside α, the pipelined rails
	// (pipe) from 128 KiB, on either placement (measured: BENCHMARKS.md);
	// never pipe on hosts of unequal sizes, where it would build hier
	// (want "": anything else).
	// Over 10 Gbit/s (namespaces of one machine, Crowd 2) from 4 MiB:
	// parts of 64 KiB at 1 MiB were slower than hier there.
	for _, tt := range []struct {
		hosts [][]int
		gbit  float64
		bytes int
		want  string
	}{
		{[][]int{{0, 1}, {2, 3}}, 1, 64 << 10, "leader"},
		{[][]int{{0, 1}, {2, 3}}, 1, 128 << 10, "pipe"},
		{[][]int{{0, 2}, {1, 3}}, 1, 64 << 10, "leader"},
		{[][]int{{0, 2}, {1, 3}}, 1, 256 << 10, "pipe"},
		{[][]int{{0, 2}, {1, 3}}, 1, 16 << 20, "pipe"},
		{[][]int{{0, 1, 2}, {3}}, 1, 16 << 20, ""},
		{[][]int{{0, 1}, {2, 3}}, 10, 1 << 20, "hier"},
		{[][]int{{0, 2}, {1, 3}}, 10, 1 << 20, "rh"},
		{[][]int{{0, 2}, {1, 3}}, 10, 4 << 20, "pipe"},
	} {
		p := New(0, 4, NetworkModel, nil)
		if err := p.SetLayout(algo.Layout{Hosts: tt.hosts}); err != nil {
			t.Fatal(err)
		}
		p.SetInterLink(algo.Link{Alpha: NetworkModel.Alpha, Beta: 8 / (tt.gbit * 1e9)})
		p.SetCrowd(2)
		a, _ := p.Choose(sched.Uniform(sched.ReduceScatter, 4, tt.bytes/16, 0, false), 4)
		if a.Name != tt.want && (tt.want != "" || a.Name == "pipe") {
			t.Errorf("ReduceScatter on %v at %v Gbit/s, %d KiB: picks %s, want %s", tt.hosts, tt.gbit, tt.bytes>>10, a.Name, tt.want)
		}
	}
	if err := New(0, 4, NetworkModel, nil).SetLayout(algo.Layout{Hosts: [][]int{{0, 1}}}); err == nil {
		t.Error("a layout of 2 of 4 ranks accepted")
	}
	if _, err := ParseOverrides("allreduce=hyper"); err == nil {
		t.Error("unknown name accepted")
	}
}

// TestFlatOnHosts checks that the flat algorithms on a communicator
// spanning hosts are priced by the links their messages take.
func TestFlatOnHosts(t *testing.T) {
	consecutive := algo.Layout{Hosts: [][]int{{0, 1}, {2, 3}}}
	interleaved := algo.Layout{Hosts: [][]int{{0, 2}, {1, 3}}}
	cost := func(l algo.Layout, name string, count int) (flat, linked float64) {
		p := New(0, 4, NetworkModel, nil)
		if err := p.SetLayout(l); err != nil {
			t.Fatal(err)
		}
		a, ok := algo.Lookup(sched.AllReduce, name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		s := sched.Uniform(sched.AllReduce, 4, count, 0, false)
		if !p.pricesLinks(s, 4) {
			t.Fatal("not priced by links")
		}
		flat = p.model.Cost(a, 4, 0, float64(4*count))
		linked, ok = p.onHosts(a, s, 4)
		if !ok {
			t.Fatalf("%s not priced by links", name)
		}
		return flat, linked
	}
	const big = 4 << 20
	// The rank-order ring crosses on one edge per host consecutively and
	// on every edge interleaved, two edges sharing each NIC: twice the
	// time at the same bytes.
	flat, cons := cost(consecutive, "ring", big)
	_, inter := cost(interleaved, "ring", big)
	if r := inter / cons; r < 1.7 || r > 2.1 { // less than 2 by the reductions
		t.Errorf("ring interleaved/consecutive = %.2f, want about 2", r)
	}
	if r := cons / flat; r < 0.95 || r > 1.05 {
		t.Errorf("ring consecutive/every message across = %.2f, want 1", r)
	}
	// Halving-doubling is the other way round: its first round stays on
	// one host when interleaved and crosses (both ranks through one NIC)
	// when consecutive.
	_, hdCons := cost(consecutive, "hd", big)
	_, hdInter := cost(interleaved, "hd", big)
	if hdInter >= hdCons/1.5 {
		t.Errorf("hd interleaved %.3g, consecutive %.3g: want the interleaved at least 1.5× cheaper", hdInter, hdCons)
	}
	// Larger communicators, and calls whose counts differ, keep the
	// every-message-across price.
	p := New(0, maxLinkRanks+1, NetworkModel, nil)
	var hosts [][]int
	for r := 0; r <= maxLinkRanks; r += 5 {
		var h []int
		for i := r; i < min(r+5, maxLinkRanks+1); i++ {
			h = append(h, i)
		}
		hosts = append(hosts, h)
	}
	if err := p.SetLayout(algo.Layout{Hosts: hosts}); err != nil {
		t.Fatal(err)
	}
	if p.pricesLinks(sched.Uniform(sched.AllReduce, maxLinkRanks+1, 8, 0, false), 4) {
		t.Error("priced by links past maxLinkRanks")
	}
	q := New(0, 4, NetworkModel, nil)
	if err := q.SetLayout(consecutive); err != nil {
		t.Fatal(err)
	}
	v := sched.Spec{Coll: sched.AllGather, N: 4, Counts: []int{1, 2, 3, 4}}
	if q.pricesLinks(v, 4) {
		t.Error("uneven AllGather priced by links")
	}
}

// TestCrowdedKernel: hosts that are network namespaces of one machine
// share its CPUs (topo.Topology.Crowd > 1). The rail forms' messages
// between hosts, one per rank at once, then take turns on the CPUs, so the
// leader forms (one message per host) are picked; with a CPU per rank the
// rails' step fewer wins. The setting reaches split communicators.
func TestCrowdedKernel(t *testing.T) {
	for _, tt := range []struct {
		crowd            float64
		hosts            [][]int
		allreduce, barrr string
	}{
		{0, [][]int{{0, 1}, {2, 3}}, "rail", "rail"},
		{1, [][]int{{0, 1}, {2, 3}}, "rail", "rail"},
		{2, [][]int{{0, 1}, {2, 3}}, "leader", "hier"},
		{2, [][]int{{0, 2}, {1, 3}}, "leader", "hier"},
		{4, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}, "leader", "hier"},
		// With 4 ranks a host the rails' dissemination inside the host
		// takes the 2 steps of the leader's gather and release: a tie,
		// which the earlier registered form wins.
		{1, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}, "rail", "hier"},
	} {
		n := 0
		for _, rs := range tt.hosts {
			n += len(rs)
		}
		p := New(0, n, NetworkModel, nil)
		if err := p.SetLayout(algo.Layout{Hosts: tt.hosts}); err != nil {
			t.Fatal(err)
		}
		p.SetInterLink(algo.Link{Alpha: NetworkModel.Alpha, Beta: 8 / 10e9})
		p.SetCrowd(tt.crowd)
		ar, err := p.Choose(sched.Uniform(sched.AllReduce, n, 2, 0, false), 4)
		if err != nil {
			t.Fatal(err)
		}
		br, err := p.Choose(sched.Spec{Coll: sched.Barrier, N: n}, 4)
		if err != nil {
			t.Fatal(err)
		}
		if ar.Name != tt.allreduce || br.Name != tt.barrr {
			t.Errorf("%v, crowd %v: AllReduce 8 B %s, Barrier %s; want %s, %s", tt.hosts, tt.crowd, ar.Name, br.Name, tt.allreduce, tt.barrr)
		}
		// Larger vectors go through one leader per host whatever the
		// crowd: the rails' bytes take turns on the NIC.
		if a, _ := p.Choose(sched.Uniform(sched.AllReduce, n, 4<<10, 0, false), 4); a.Name != "leader" {
			t.Errorf("%v, crowd %v: AllReduce 16 KiB %s, want leader", tt.hosts, tt.crowd, a.Name)
		}
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		q := New(0, n, NetworkModel, nil)
		if err := q.Inherit(p, all); err != nil {
			t.Fatal(err)
		}
		if q.Crowd() != tt.crowd {
			t.Errorf("crowd %v inherited as %v", tt.crowd, q.Crowd())
		}
	}
}

package plan

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/sched"
)

func TestParseOverrides(t *testing.T) {
	tests := []struct {
		in      string
		want    Overrides
		wantErr bool
	}{
		{"", Overrides{}, false},
		{"allreduce=ring", Overrides{sched.AllReduce: "ring"}, false},
		{" AllReduce = TREE , broadcast=pipeline", Overrides{sched.AllReduce: "dbtree", sched.Broadcast: "chain"}, false},
		{"bcast=binomial,,", Overrides{sched.Broadcast: "binomial"}, false},
		{"allreduce=nope", nil, true},
		{"frobnicate=ring", nil, true},
		{"nosuchalgo", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseOverrides(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseOverrides(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if tt.wantErr {
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("ParseOverrides(%q) = %v, want %v", tt.in, got, tt.want)
		}
		for c, n := range tt.want {
			if got[c] != n {
				t.Errorf("ParseOverrides(%q)[%v] = %q, want %q", tt.in, c, got[c], n)
			}
		}
	}
	// A bare name applies to every collective that has it.
	o, err := ParseOverrides("ring")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []sched.Coll{sched.AllReduce, sched.AllGather, sched.ReduceScatter} {
		if o[c] != "ring" {
			t.Errorf("bare ring: %v -> %q", c, o[c])
		}
	}
	if _, ok := o[sched.Broadcast]; ok {
		t.Errorf("bare ring set Broadcast, which has no ring")
	}
}

func FuzzParseOverrides(f *testing.F) {
	for _, s := range []string{"allreduce=ring,broadcast=tree", "ring", "=", ",,=,", "allreduce=", "x=y=z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseOverrides(s)
		if err != nil {
			return
		}
		for c, name := range o {
			if _, ok := algo.Lookup(c, name); !ok {
				t.Fatalf("ParseOverrides(%q) accepted %v=%q, which does not exist", s, c, name)
			}
		}
	})
}

// Every algorithm the registry has must have a finite cost, or the model
// could never choose it.
func TestEveryAlgorithmHasACost(t *testing.T) {
	for _, a := range algo.All() {
		if c := MemoryModel.Cost(a, 8, 0, 4096); math.IsInf(c, 0) || math.IsNaN(c) || c < 0 {
			t.Errorf("%v %s: cost %v", a.Coll, a.Name, c)
		}
	}
}

func TestChoose(t *testing.T) {
	tests := []struct {
		coll  sched.Coll
		n     int
		count int
		model Model
		want  []string // acceptable choices
	}{
		// Tiny messages: latency-optimal, logarithmic algorithms.
		{sched.AllReduce, 16, 2, MemoryModel, []string{"rd", "dbtree"}},
		{sched.Broadcast, 16, 2, MemoryModel, []string{"binomial"}},
		{sched.Barrier, 16, 0, MemoryModel, []string{"dissemination"}},
		// Large messages: bandwidth-optimal ones.
		{sched.AllReduce, 16, 16 << 20, MemoryModel, []string{"ring", "hd"}},
		{sched.AllGather, 8, 4 << 20, NetworkModel, []string{"ring", "bruck", "rd"}},
		{sched.Broadcast, 16, 64 << 20, NetworkModel, []string{"chain", "sag"}},
	}
	for _, tt := range tests {
		p := New(0, tt.n, tt.model, nil)
		a, err := p.Choose(sched.Uniform(tt.coll, tt.n, tt.count, 0, false), 4)
		if err != nil {
			t.Fatal(err)
		}
		ok := false
		for _, w := range tt.want {
			ok = ok || a.Name == w
		}
		if !ok {
			t.Errorf("%v n=%d count=%d: chose %s, want one of %v", tt.coll, tt.n, tt.count, a.Name, tt.want)
		}
	}
}

func TestOverrideAndCache(t *testing.T) {
	p := New(1, 4, MemoryModel, Overrides{sched.AllReduce: "ring"})
	s := sched.Uniform(sched.AllReduce, 4, 8, 0, false)
	p1, err := p.Program(s, 4)
	if err != nil {
		t.Fatal(err)
	}
	if p1.Algo != "ring" || p1.Rank != 1 {
		t.Fatalf("program %s rank %d, want ring rank 1", p1.Algo, p1.Rank)
	}
	p2, _ := p.Program(s, 4)
	if p1 != p2 {
		t.Error("a uniform call was not served from the cache")
	}
	// Uneven counts are built each time, and still honour the override.
	v := sched.Spec{Coll: sched.AllGather, N: 4, Counts: []int{1, 2, 3, 4}}
	q1, _ := p.Program(v, 4)
	q2, _ := p.Program(v, 4)
	if q1 == q2 {
		t.Error("an uneven call was cached")
	}
	if _, err := New(0, 4, MemoryModel, nil).Program(sched.Spec{Coll: 99, N: 4}, 4); !errors.Is(err, ErrNoAlgorithm) {
		t.Errorf("unknown collective: %v", err)
	}
}

// TestUniformLastHit alternates uniform calls so that the one-entry fast
// path is hit and missed, and checks each lookup returns the program of
// its own call, without allocating once cached.
func TestUniformLastHit(t *testing.T) {
	p := New(2, 4, MemoryModel, nil)
	type call struct {
		coll     sched.Coll
		count    int
		root     int
		inPlace  bool
		elemSize int
	}
	calls := []call{
		{sched.AllReduce, 1024, 0, false, 4},
		{sched.AllReduce, 1024, 0, true, 4},
		{sched.AllReduce, 1024, 0, false, 8},
		{sched.Broadcast, 1024, 3, false, 4},
		{sched.Broadcast, 1024, 1, false, 4},
		{sched.Barrier, 0, 0, false, 1},
		{sched.AllReduce, 7, 0, false, 4},
	}
	first := make([]*sched.Program, len(calls))
	for round := range 3 {
		for i, c := range calls {
			for range 2 { // twice in a row: the second is a last-hit
				prog, err := p.Uniform(c.coll, c.count, c.root, c.inPlace, c.elemSize)
				if err != nil {
					t.Fatal(err)
				}
				if round == 0 && first[i] == nil {
					first[i] = prog
				}
				if prog != first[i] {
					t.Fatalf("round %d call %+v: a different program than the first time", round, c)
				}
			}
		}
	}
	for i := range first {
		for j := range i {
			if first[i] == first[j] {
				t.Errorf("calls %+v and %+v share a program", calls[i], calls[j])
			}
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, c := range calls {
			p.Uniform(c.coll, c.count, c.root, c.inPlace, c.elemSize)
		}
	})
	if allocs != 0 {
		t.Errorf("cached uniform lookups allocate %.1f times per round", allocs)
	}
}

// TestPicks pins what the planner chooses at 2 and 4 ranks, the sizes
// hcomm perf compares against the baselines, so that a change of the cost
// functions that moves a choice is a deliberate one (update the table and
// say why in the commit).
func TestPicks(t *testing.T) {
	colls := []sched.Coll{sched.AllReduce, sched.Reduce, sched.Broadcast, sched.AllGather,
		sched.ReduceScatter, sched.AllToAll, sched.Gather, sched.Scatter}
	tests := []struct {
		model string
		n     int
		bytes int
		want  string // the choices for colls, in order
	}{
		{"memory", 2, 8, "rd binomial binomial ring ring pairwise linear linear"},
		{"memory", 2, 64 << 10, "ring rsg binomial ring ring pairwise linear linear"},
		{"memory", 2, 32 << 20, "ring rsg binomial ring ring pairwise linear linear"},
		{"memory", 4, 8, "rd binomial binomial rd rh bruck binomial binomial"},
		{"memory", 4, 64 << 10, "hd rsg sag rd rh pairwise binomial binomial"},
		{"memory", 4, 32 << 20, "hd chain chain rd rh pairwise binomial binomial"},
		{"network", 2, 8, "rd binomial binomial ring ring pairwise linear linear"},
		{"network", 2, 64 << 10, "rd binomial binomial ring ring pairwise linear linear"},
		{"network", 2, 32 << 20, "ring rsg binomial ring ring pairwise linear linear"},
		{"network", 4, 8, "rd binomial binomial rd rh bruck binomial binomial"},
		{"network", 4, 64 << 10, "rd binomial binomial rd rh bruck binomial binomial"},
		{"network", 4, 32 << 20, "hd chain chain rd rh pairwise binomial binomial"},
	}
	for _, tt := range tests {
		m := MemoryModel
		if tt.model == "network" {
			m = NetworkModel
		}
		var got []string
		for _, c := range colls {
			// bytes is the call's size as the cost functions take it:
			// a rank's vector, or the total of all blocks.
			count := tt.bytes / 4
			if c != sched.AllReduce && c != sched.Reduce && c != sched.Broadcast {
				count = max(1, count/tt.n)
			}
			a, err := New(0, tt.n, m, nil).Choose(sched.Uniform(c, tt.n, count, 0, false), 4)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, a.Name)
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("%s model, %d ranks, %d bytes: chose %s, want %s", tt.model, tt.n, tt.bytes, g, tt.want)
		}
	}
}

// TestChoiceSameOnEveryRank checks that the choice reads nothing a rank
// knows alone: whether its own call is in place, and of an AllToAllV its
// own row and column of the counts.
func TestChoiceSameOnEveryRank(t *testing.T) {
	for _, c := range []sched.Coll{sched.AllReduce, sched.Reduce, sched.Broadcast, sched.AllGather,
		sched.ReduceScatter, sched.AllToAll, sched.Gather, sched.Scatter} {
		for _, n := range []int{2, 3, 4, 5, 8} {
			for _, count := range []int{1, 100, 10000, 1 << 20} {
				for _, m := range []Model{MemoryModel, NetworkModel} {
					p := New(0, n, m, nil)
					a, err := p.Choose(sched.Uniform(c, n, count, n-1, false), 4)
					if err != nil {
						t.Fatal(err)
					}
					b, err := p.Choose(sched.Uniform(c, n, count, n-1, true), 4)
					if err != nil {
						t.Fatal(err)
					}
					if a.Name != b.Name {
						t.Errorf("%s n=%d count=%d: %s out of place, %s in place", c, n, count, a.Name, b.Name)
					}
				}
			}
		}
	}
	// AllToAllV: each rank sees its row and column; the others are zero.
	const n = 5
	full := make([][]int, n)
	for i := range full {
		full[i] = make([]int, n)
		for j := range full[i] {
			full[i][j] = (i*7 + j*3) % 4 * 1000
		}
	}
	full[0] = make([]int, n) // rank 0 sends nothing
	var first string
	for r := range n {
		view := make([][]int, n)
		for i := range view {
			view[i] = make([]int, n)
			view[i][r] = full[i][r]
		}
		copy(view[r], full[r])
		for _, m := range []Model{MemoryModel, NetworkModel} {
			a, err := New(r, n, m, nil).Choose(sched.Spec{Coll: sched.AllToAll, N: n, Matrix: view}, 4)
			if err != nil {
				t.Fatal(err)
			}
			if first == "" {
				first = a.Name
			}
			if a.Name != first {
				t.Errorf("AllToAllV: rank %d chose %s, rank 0 %s", r, a.Name, first)
			}
		}
	}
}

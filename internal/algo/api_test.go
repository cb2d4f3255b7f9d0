package algo

import (
	"strings"
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
)

func TestRegistry(t *testing.T) {
	want := map[sched.Coll][]string{
		sched.AllReduce:     {"ring", "rd", "hd", "dbtree"},
		sched.Reduce:        {"binomial", "chain", "rsg"},
		sched.Broadcast:     {"binomial", "chain", "sag"},
		sched.AllGather:     {"ring", "bruck", "rd"},
		sched.ReduceScatter: {"ring", "rh", "pairwise"},
		sched.AllToAll:      {"pairwise", "linear", "bruck"},
		sched.Gather:        {"linear", "binomial"},
		sched.Scatter:       {"linear", "binomial"},
		sched.Barrier:       {"dissemination"},
	}
	total := 0
	for coll, names := range want {
		got := For(coll)
		if len(got) != len(names) {
			t.Errorf("For(%s) has %d algorithms, want %d", coll, len(got), len(names))
			continue
		}
		for i, a := range got {
			if a.Name != names[i] || a.Coll != coll {
				t.Errorf("For(%s)[%d] = %s %s, want %s", coll, i, a.Coll, a.Name, names[i])
			}
			if a.Name != strings.ToLower(a.Name) || a.Supports == nil || a.Build == nil || a.Cost == nil {
				t.Errorf("%s %s: malformed entry", coll, a.Name)
			}
			l, ok := Lookup(coll, a.Name)
			if !ok || l.Name != a.Name || l.Coll != coll {
				t.Errorf("Lookup(%s, %q) = %v, %v", coll, a.Name, l.Name, ok)
			}
		}
		total += len(names)
	}
	if n := len(All()); n != total {
		t.Errorf("All has %d algorithms, want %d", n, total)
	}
	if _, ok := Lookup(sched.AllReduce, "bruck"); ok {
		t.Error("Lookup(AllReduce, bruck) succeeded")
	}
	if _, ok := Lookup(sched.AllReduce, "Ring"); ok {
		t.Error("Lookup is not case sensitive")
	}
	// All returns a copy.
	All()[0].Name = "changed"
	if All()[0].Name == "changed" {
		t.Error("All exposes the registry")
	}
}

// TestBuildErrors checks that malformed specs are refused, not panicked on.
func TestBuildErrors(t *testing.T) {
	ring, _ := Lookup(sched.AllReduce, "ring")
	pairwise, _ := Lookup(sched.AllToAll, "pairwise")
	binomial, _ := Lookup(sched.Reduce, "binomial")
	tests := []struct {
		name string
		a    Algorithm
		s    sched.Spec
		rank int
		want string
	}{
		{"no ranks", ring, sched.Spec{Coll: sched.AllReduce}, 0, "0 ranks"},
		{"rank too big", ring, sched.Uniform(sched.AllReduce, 4, 1, 0, false), 4, "rank 4"},
		{"negative rank", ring, sched.Uniform(sched.AllReduce, 4, 1, 0, false), -1, "rank -1"},
		{"wrong collective", ring, sched.Uniform(sched.AllGather, 4, 1, 0, false), 0, "cannot build AllGather"},
		{"short counts", ring, sched.Spec{Coll: sched.AllReduce, N: 4, Counts: []int{1, 1}}, 0, "2 counts"},
		{"negative count", ring, sched.Spec{Coll: sched.AllReduce, N: 2, Counts: []int{-1, -1}}, 0, "negative count"},
		{"unequal counts", ring, sched.Spec{Coll: sched.AllReduce, N: 2, Counts: []int{1, 2}}, 0, "equal counts"},
		{"bad root", binomial, sched.Uniform(sched.Reduce, 4, 1, 4, false), 0, "root 4"},
		{"no matrix", pairwise, sched.Spec{Coll: sched.AllToAll, N: 3}, 0, "0 rows"},
		{"short row", pairwise, sched.Spec{Coll: sched.AllToAll, N: 2, Matrix: [][]int{{1, 1}, {1}}}, 1, "row 1"},
		{"negative entry", pairwise, sched.Spec{Coll: sched.AllToAll, N: 2, Matrix: [][]int{{1, -1}, {1, 1}}}, 0, "negative"},
		{"asymmetric in place", pairwise, sched.Spec{Coll: sched.AllToAll, N: 2, InPlace: true, Matrix: [][]int{{1, 2}, {1, 1}}}, 1, "symmetric"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := tt.a.Build(tt.s, tt.rank)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build = %v, %v; want error mentioning %q", p, err, tt.want)
			}
		})
	}
}

// TestAllToAllReadsOwnRowAndColumn builds with a matrix whose entries outside
// the rank's row and column are garbage: the program must not change.
func TestAllToAllReadsOwnRowAndColumn(t *testing.T) {
	const n = 7
	for _, a := range For(sched.AllToAll) {
		for _, inPlace := range []bool{false, true} {
			s := sched.Spec{Coll: sched.AllToAll, N: n, InPlace: inPlace, Matrix: randomMatrix(newRand(5), n, inPlace)}
			if !a.Supports(s) {
				s = sched.Uniform(sched.AllToAll, n, 3, 0, inPlace)
			}
			for r := range n {
				want, err := a.Build(s, r)
				if err != nil {
					t.Fatal(err)
				}
				m := make([][]int, n)
				for i := range m {
					m[i] = make([]int, n)
					for j := range m[i] {
						m[i][j] = -1000 - i - j
						if i == r || j == r {
							m[i][j] = s.Matrix[i][j]
						}
					}
				}
				got, err := a.Build(sched.Spec{Coll: sched.AllToAll, N: n, InPlace: inPlace, Matrix: m}, r)
				if err != nil {
					t.Fatalf("%s rank %d: %v", a.Name, r, err)
				}
				if got.String() != want.String() {
					t.Fatalf("%s rank %d depends on other ranks' rows:\n%v\n%v", a.Name, r, got, want)
				}
			}
		}
	}
}

// TestMutationsDetected makes sure the verification the tests rely on can
// fail: dropping any one rank's last step must be reported.
func TestMutationsDetected(t *testing.T) {
	for _, a := range All() {
		s := sched.Uniform(a.Coll, 6, 7, 2, false)
		if a.Coll == sched.Barrier {
			s = sched.Spec{Coll: a.Coll, N: 6}
		}
		for r := range s.N {
			progs := buildAll(t, a, s)
			p := progs[r]
			if len(p.Steps) == 0 {
				continue
			}
			p.Steps = p.Steps[:len(p.Steps)-1]
			if err := sched.Verify(s, progs); err == nil {
				t.Errorf("%s %s: dropping rank %d's last step went unnoticed", a.Coll, a.Name, r)
			}
		}
	}
}

// TestScratch checks the scratch figures the cost comments promise.
func TestScratch(t *testing.T) {
	tests := []struct {
		coll       sched.Coll
		algo       string
		inPlace    bool
		n, count   int
		maxScratch int
	}{
		{sched.AllReduce, "ring", true, 9, 100, 0},
		{sched.AllReduce, "ring", false, 9, 100, 0},
		{sched.AllReduce, "hd", false, 9, 100, 0},
		{sched.AllReduce, "dbtree", true, 9, 100, 0},
		{sched.AllReduce, "rd", false, 9, 100, 100},
		{sched.Reduce, "rsg", false, 9, 100, 2 * 12},
		{sched.AllGather, "ring", false, 9, 10, 0},
		{sched.ReduceScatter, "ring", true, 9, 10, 2 * 10},
		{sched.ReduceScatter, "rh", false, 8, 10, 40},
		{sched.AllToAll, "pairwise", false, 9, 10, 0},
		{sched.AllToAll, "pairwise", true, 9, 10, 2 * 10},
		{sched.AllToAll, "bruck", false, 9, 10, 2 * 5 * 10},
		{sched.AllToAll, "bruck", true, 9, 10, (8 + 2*5) * 10},
		{sched.ReduceScatter, "pairwise", true, 9, 10, 0},
		{sched.ReduceScatter, "pairwise", false, 9, 10, 0},
		{sched.AllGather, "rd", true, 8, 10, 0},
		{sched.Broadcast, "sag", false, 9, 100, 0},
	}
	for _, tt := range tests {
		a, _ := Lookup(tt.coll, tt.algo)
		for _, p := range buildAll(t, a, sched.Uniform(tt.coll, tt.n, tt.count, 0, tt.inPlace)) {
			if p.Scratch > tt.maxScratch {
				t.Errorf("%s %s n=%d count=%d in-place=%v: rank %d uses %d scratch elements, want at most %d",
					tt.coll, tt.algo, tt.n, tt.count, tt.inPlace, p.Rank, p.Scratch, tt.maxScratch)
			}
		}
	}
}

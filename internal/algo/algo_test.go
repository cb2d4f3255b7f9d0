package algo

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// buildAll builds every rank's program of s with a.
func buildAll(t testing.TB, a Algorithm, s sched.Spec) []*sched.Program {
	t.Helper()
	progs := make([]*sched.Program, s.N)
	for r := range s.N {
		p, err := a.Build(s, r)
		if err != nil {
			t.Fatalf("%s %s: build rank %d of %s: %v", a.Coll, a.Name, r, describe(s), err)
		}
		if p.Algo != a.Name || p.Rank != r || p.Size != s.N {
			t.Fatalf("%s %s: rank %d program says algo %q rank %d size %d", a.Coll, a.Name, r, p.Algo, p.Rank, p.Size)
		}
		progs[r] = p
	}
	return progs
}

// verify builds and verifies s with a, failing t with a description of s.
func verify(t testing.TB, a Algorithm, s sched.Spec) {
	t.Helper()
	if err := s.Validate(); err != nil {
		t.Fatalf("bad test spec %s: %v", describe(s), err)
	}
	if !a.Supports(s) {
		t.Fatalf("%s %s does not support %s", a.Coll, a.Name, describe(s))
	}
	if err := sched.Verify(s, buildAll(t, a, s)); err != nil {
		t.Fatalf("%s %s on %s: %v", a.Coll, a.Name, describe(s), err)
	}
}

func describe(s sched.Spec) string {
	d := fmt.Sprintf("%s n=%d", s.Coll, s.N)
	if s.Coll.Rooted() {
		d += fmt.Sprintf(" root=%d", s.Root)
	}
	if s.InPlace {
		d += " in-place"
	}
	switch {
	case s.Matrix != nil && s.N <= 8:
		d += fmt.Sprintf(" matrix=%v", s.Matrix)
	case s.Matrix != nil:
		d += " (matrix)"
	case s.N <= 16 || !unequal(s.Counts):
		if len(s.Counts) > 0 && !unequal(s.Counts) {
			d += fmt.Sprintf(" count=%d", s.Counts[0])
		} else {
			d += fmt.Sprintf(" counts=%v", s.Counts)
		}
	default:
		d += " (unequal counts)"
	}
	return d
}

func unequal(c []int) bool {
	for _, v := range c {
		if v != c[0] {
			return true
		}
	}
	return false
}

// specs returns the specs every algorithm of coll must verify on for n ranks.
func specs(coll sched.Coll, n int, rng *rand.Rand) []sched.Spec {
	counts := []int{0, 1, n - 1, n, n + 1, 2*n + 3, rng.IntN(4*n + 8)}
	roots := []int{0}
	if coll.Rooted() {
		roots = []int{0, n - 1, rng.IntN(n)}
	}
	inPlace := []bool{false, true}
	if coll == sched.Broadcast || coll == sched.Barrier {
		inPlace = []bool{false}
	}
	if coll == sched.Barrier {
		return []sched.Spec{{Coll: coll, N: n}}
	}
	var out []sched.Spec
	for _, ip := range inPlace {
		for _, root := range dedup(roots) {
			for _, c := range dedup(counts) {
				out = append(out, sched.Uniform(coll, n, c, root, ip))
			}
			switch coll {
			case sched.AllGather, sched.ReduceScatter, sched.Gather, sched.Scatter:
				for range 2 {
					out = append(out, sched.Spec{Coll: coll, N: n, Root: root, InPlace: ip, Counts: randomCounts(rng, n)})
				}
			case sched.AllToAll:
				for range 2 {
					out = append(out, sched.Spec{Coll: coll, N: n, InPlace: ip, Matrix: randomMatrix(rng, n, ip)})
				}
			}
		}
	}
	return out
}

func dedup(v []int) []int {
	var out []int
	seen := map[int]bool{}
	for _, x := range v {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// randomCounts returns n counts in [0, 5), about a third of them zero.
func randomCounts(rng *rand.Rand, n int) []int {
	c := make([]int, n)
	for i := range c {
		if rng.IntN(3) > 0 {
			c[i] = rng.IntN(5)
		}
	}
	return c
}

// randomMatrix returns an n×n matrix of counts in [0, 4), symmetric if sym.
func randomMatrix(rng *rand.Rand, n int, sym bool) [][]int {
	m := make([][]int, n)
	for i := range m {
		m[i] = make([]int, n)
		for j := range m[i] {
			if sym && j < i {
				m[i][j] = m[j][i]
				continue
			}
			m[i][j] = rng.IntN(4)
		}
	}
	return m
}

// TestVerifyAll verifies every algorithm for every n in 1..64 on the counts,
// roots, in-place modes, unequal counts and matrices of specs.
func TestVerifyAll(t *testing.T) {
	maxN := 64
	if testing.Short() || raceEnabled {
		maxN = 24
	}
	for _, a := range All() {
		t.Run(a.Coll.String()+"/"+a.Name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(a.Coll), 1))
			for n := 1; n <= maxN; n++ {
				verified := 0
				for _, s := range specs(a.Coll, n, rng) {
					if a.Supports(s) { // every spec but for AllToAll bruck
						verify(t, a, s)
						verified++
					}
				}
				if verified == 0 {
					t.Fatalf("n=%d: only %d specs supported", n, verified)
				}
			}
		})
	}
}

// TestVerifyLarge verifies every algorithm for two random larger rank counts
// (up to 1024), with counts near n.
func TestVerifyLarge(t *testing.T) {
	for i, a := range All() {
		t.Run(a.Coll.String()+"/"+a.Name, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(i), 2))
			ns := []int{65 + rng.IntN(200), 513 + rng.IntN(512)}
			if i == 0 {
				ns[1] = 1024
			}
			if testing.Short() || raceEnabled {
				ns = ns[:1]
			}
			for _, n := range ns {
				count := n + rng.IntN(n+4) - 2
				root := rng.IntN(n)
				ip := rng.IntN(2) == 0 && a.Coll != sched.Broadcast
				var s sched.Spec
				switch a.Coll {
				case sched.Barrier:
					s = sched.Spec{Coll: a.Coll, N: n}
				case sched.AllToAll:
					s = sched.Spec{Coll: a.Coll, N: n, InPlace: ip, Matrix: randomMatrix(rng, n, ip)}
				case sched.AllGather, sched.ReduceScatter, sched.Gather, sched.Scatter:
					s = sched.Spec{Coll: a.Coll, N: n, Root: root, InPlace: ip, Counts: randomCounts(rng, n)}
				default:
					s = sched.Uniform(a.Coll, n, count, root, ip)
				}
				if !a.Supports(s) {
					s = sched.Uniform(a.Coll, n, 1+rng.IntN(3), root, ip)
				}
				verify(t, a, s)
			}
		})
	}
}

// TestDeterministic checks that two builds of the same spec are equal.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, a := range All() {
		for _, n := range []int{1, 5, 16, 37} {
			for _, s := range specs(a.Coll, n, rng) {
				if !a.Supports(s) {
					continue
				}
				for r := range n {
					p1, err1 := a.Build(s, r)
					p2, err2 := a.Build(s, r)
					if err1 != nil || err2 != nil {
						t.Fatalf("%s %s: %v, %v", a.Coll, a.Name, err1, err2)
					}
					if !reflect.DeepEqual(p1, p2) {
						t.Fatalf("%s %s rank %d of %s: two builds differ:\n%v\n%v", a.Coll, a.Name, r, describe(s), p1, p2)
					}
				}
			}
		}
	}
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed)) }

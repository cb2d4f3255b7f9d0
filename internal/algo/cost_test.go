package algo

import (
	"fmt"
	"math"
	"testing"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// costRanks are the rank counts at which every cost function is held to
// its schedule.
var costRanks = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 33, 64}

// measured returns the critical-path terms of programs of a call of size n
// (see the package comment): messages, and elements moved, reduced and
// copied per element of n.
func measured(t *testing.T, progs []*sched.Program, n float64) Cost {
	t.Helper()
	var c [4]float64
	for i, r := range []sched.Rates{{Alpha: 1}, {Beta: 1}, {Gamma: 1}, {Delta: 1}} {
		v, err := sched.CriticalPath(progs, r)
		if err != nil {
			t.Fatal(err)
		}
		c[i] = v
	}
	return Cost{Alpha: c[0], Beta: c[1] / n, Gamma: c[2] / n, Delta: c[3] / n}
}

// costSpec returns a uniform spec of coll at p ranks whose size divides
// into every block split the algorithms make, and that size.
func costSpec(coll sched.Coll, p, root int, inPlace bool) (sched.Spec, float64) {
	count := 128 * p
	if coll == sched.Barrier {
		return sched.Spec{Coll: coll, N: p}, 1
	}
	s := sched.Uniform(coll, p, count, root, inPlace)
	switch coll {
	case sched.AllGather, sched.ReduceScatter, sched.Gather, sched.Scatter, sched.AllToAll:
		return s, float64(count * p)
	}
	return s, float64(count)
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestCostMatchesSchedule holds every algorithm's cost function to the
// critical path of the programs it builds, exactly, for the rank counts of
// costRanks, in place and not, at several roots. Pipelining is left out
// (Chunk 0): the IR does not cut messages into pieces, so what the cost
// functions of chain and dbtree add for it is a model, checked by
// TestPipelinedCost only for its shape.
func TestCostMatchesSchedule(t *testing.T) {
	for _, a := range All() {
		t.Run(a.Coll.String()+"/"+a.Name, func(t *testing.T) {
			t.Parallel()
			for _, p := range costRanks {
				roots := []int{0}
				if a.Coll.Rooted() && p > 1 {
					roots = dedup([]int{0, p - 1, p / 3, (p/2 + 1) % p})
				}
				for _, ip := range []bool{false, true} {
					for _, root := range roots {
						s, n := costSpec(a.Coll, p, root, ip)
						if !a.Supports(s) {
							continue
						}
						got := measured(t, buildAll(t, a, s), n)
						want := a.Cost(Shape{P: p, Root: root, InPlace: ip, N: n})
						if !closeTo(got.Alpha, want.Alpha) || !closeTo(got.Beta, want.Beta) ||
							!closeTo(got.Gamma, want.Gamma) || !closeTo(got.Delta, want.Delta) {
							t.Errorf("%s: schedule α %g β %.6g γ %.6g δ %.6g, cost function α %g β %.6g γ %.6g δ %.6g",
								describe(s), got.Alpha, got.Beta, got.Gamma, got.Delta, want.Alpha, want.Beta, want.Gamma, want.Delta)
						}
					}
				}
			}
		})
	}
}

// TestPipelinedCost checks what the pipelined cost functions add: with the
// message in one piece nothing, and cut into more pieces a cost that
// falls toward the bandwidth term as the pieces get smaller while the
// latency term grows.
func TestPipelinedCost(t *testing.T) {
	for _, a := range All() {
		for _, p := range []int{2, 3, 8, 33} {
			const n = 1 << 20
			one := a.Cost(Shape{P: p, N: n})
			if c := a.Cost(Shape{P: p, N: n, Chunk: n}); c != one {
				t.Errorf("%s %s p=%d: one piece costs %+v, unpipelined %+v", a.Coll, a.Name, p, c, one)
			}
			prev := one
			for _, chunk := range []float64{n / 4, n / 64, n / 1024} {
				c := a.Cost(Shape{P: p, N: n, Chunk: chunk})
				if c.Alpha < prev.Alpha || c.Beta > prev.Beta+1e-12 || c.Gamma > prev.Gamma+1e-12 {
					t.Errorf("%s %s p=%d chunk n/%g: %+v after %+v", a.Coll, a.Name, p, n/chunk, c, prev)
				}
				prev = c
			}
		}
	}
}

// TestCostTable prints every cost function's terms (go test -v -run
// CostTable): the table of the package comment's cost model.
func TestCostTable(t *testing.T) {
	if !testing.Verbose() {
		t.Skip("prints only with -v")
	}
	for _, a := range All() {
		line := fmt.Sprintf("%-13s %-13s", a.Coll, a.Name)
		for _, p := range []int{2, 3, 4, 5, 7, 8, 16, 64} {
			c := a.Cost(Shape{P: p})
			line += fmt.Sprintf(" | %g %.4g %.4g %.4g", c.Alpha, c.Beta, c.Gamma, c.Delta)
		}
		t.Log(line)
	}
}

// Package algo holds hcomm's collective algorithms. Each one is a pure
// function from a collective (a sched.Spec) and a rank to the sched.Program
// that rank executes: no I/O, no randomness, no shared state. The same
// program is run by the executor (internal/exec), checked by sched.Verify
// and timed by internal/sim's discrete-event model (hcomm sim). All, For
// and Lookup list them; Algorithm.Name is what HCOMM_ALGO selects.
//
// # Cost model
//
// Every algorithm carries its cost function (Algorithm.Cost, written next to
// its builder): the terms of its critical path as functions of the rank
// count p, the root, whether the call is in place and, for algorithms whose
// forwarding ops the executor pipelines, the chunk size. The terms are what
// sched.CriticalPath measures on the built programs in the one-port model
// (a rank sends one message and receives one at a time, and does its local
// copies before its messages): α, the messages on the critical path; β, γ
// and δ, the elements moved, reduced and copied along it, as multiples of
// the call's size n — a rank's vector for AllReduce, Reduce and Broadcast,
// the total ΣCounts for AllGather, ReduceScatter, Gather and Scatter, a
// rank's row sum for AllToAll. The δ term, beyond the textbook α–β–γ model,
// tells apart algorithms that move the same data but copy it about (Bruck
// rotates its result into place). A test holds every cost function to the
// programs it prices.
package algo

import (
	"fmt"
	"slices"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// Algorithm builds per-rank programs for one collective and prices them.
type Algorithm struct {
	// Name is short and lower case; it is what HCOMM_ALGO selects.
	Name string
	// Coll is the collective the algorithm implements.
	Coll sched.Coll
	// Supports reports whether Build accepts the spec. Unless an entry
	// says otherwise, an algorithm supports every number of ranks and
	// every count, including 0.
	Supports func(s sched.Spec) bool
	// Build returns the program rank executes for s. It is deterministic
	// and reads only what rank knows at run time (for AllToAll: row and
	// column rank of s.Matrix).
	Build func(s sched.Spec, rank int) (*sched.Program, error)
	// Cost returns the critical-path terms of a uniform call of shape sh.
	Cost func(sh Shape) Cost
	// LinkCost, set on the layout algorithms (ForLayout) instead of Cost,
	// estimates the time in seconds of a uniform call of the given size
	// in bytes (see the package comment) on the layout the algorithm was
	// built for, each message costed by its link class.
	LinkCost func(bytes float64, lc LinkCosts) float64
}

// Shape is what a cost function knows of a call.
type Shape struct {
	// P is the number of ranks.
	P int
	// Root is the root of a rooted collective.
	Root int
	// InPlace reports whether the call is in place.
	InPlace bool
	// N is the size of the call (see the package comment) and Chunk the
	// piece size the executor pipelines forwarding ops in, in one unit
	// (elements or bytes). Only pipelined algorithms read them; Chunk 0
	// means no pipelining.
	N, Chunk float64
}

// Cost holds the critical-path terms of a call in the α–β–γ model,
// extended by local copies: it takes Alpha·α + (Beta·β + Gamma·γ +
// Delta·δ)·N, where α is the cost of a message, β of moving one unit, γ of
// reducing one and δ of copying one within a rank.
type Cost struct {
	Alpha float64 // messages on the critical path
	Beta  float64 // units moved along it, per unit of N
	Gamma float64 // units reduced along it, per unit of N
	Delta float64 // units copied along it, per unit of N
}

// Time returns the cost of a call of n units under the given rates.
func (c Cost) Time(alpha, beta, gamma, delta, n float64) float64 {
	return c.Alpha*alpha + (c.Beta*beta+c.Gamma*gamma+c.Delta*delta)*n
}

// builder is the signature shared by the algorithm implementations. The spec
// has been checked by checkSpec before it is called.
type builder func(p *prog)

// algorithms is the registry. The order within a collective is the order
// For returns, and the planner takes the earlier of two algorithms of equal
// cost.
//
// To add an algorithm: write its builder (a func(*prog) that appends the
// rank's steps; see prog.go) and its cost function (a func(Shape) Cost
// returning what sched.CriticalPath measures on its programs) side by side
// in a file of this package, and add a def line below — or, from its own
// file, call register(def(...)) in an init function (it then comes after
// the entries below). Restrict it with .only(...) if it does not support
// every spec. TestVerifyAll, TestCostMatchesSchedule and the root package's
// TestMatrixAlgorithms pick it up from the registry; HCOMM_ALGO can force
// it by name at once.
var algorithms = []Algorithm{
	// AllReduce ring: reduce-scatter then allgather around the ring.
	def(sched.AllReduce, "ring", ringAllReduce, ringAllReduceCost),
	// AllReduce rd: recursive doubling on whole vectors; the n−P extra
	// ranks fold into a partner first and get the result back at the end.
	// Scratch m.
	def(sched.AllReduce, "rd", rdAllReduce, rdAllReduceCost),
	// AllReduce hd: recursive-halving reduce-scatter and recursive-doubling
	// allgather (Rabenseifner), with the same fold as rd.
	def(sched.AllReduce, "hd", hdAllReduce, hdAllReduceCost),
	// AllReduce dbtree: two complementary binary trees, each reducing then
	// broadcasting half of the vector, both at once; every rank is a leaf
	// in at least one tree. The forwarding ops are pipelined.
	def(sched.AllReduce, "dbtree", dbtreeAllReduce, dbtreeAllReduceCost),

	// Reduce binomial: binomial tree toward the root. Scratch m on inner
	// ranks.
	def(sched.Reduce, "binomial", binomialReduce, binomialReduceCost),
	// Reduce chain: one pipelined chain root+n−1 → … → root+1 → root.
	// Scratch m on inner ranks.
	def(sched.Reduce, "chain", chainReduce, chainReduceCost),
	// Reduce rsg: ring reduce-scatter, then every rank sends its reduced
	// block to the root. Scratch 2⌈m/n⌉ on ranks other than the root.
	def(sched.Reduce, "rsg", rsgReduce, rsgReduceCost),

	// Broadcast binomial: binomial tree from the root.
	def(sched.Broadcast, "binomial", binomialBroadcast, binomialBroadcastCost),
	// Broadcast chain: one pipelined chain root → root+1 → … → root+n−1.
	def(sched.Broadcast, "chain", chainBroadcast, chainBroadcastCost),
	// Broadcast sag: binomial scatter of n blocks, then ring allgather
	// (van de Geijn).
	def(sched.Broadcast, "sag", sagBroadcast, sagBroadcastCost),

	// AllGather ring: n−1 ring steps, unequal counts allowed.
	def(sched.AllGather, "ring", ringAllGather, ringAllGatherCost),
	// AllGather bruck: ⌈log2 n⌉ rounds at distances 1, 2, 4, …, gathered
	// in rank-relative order in scratch and rotated into place at the end;
	// unequal counts allowed. Scratch T (none on rank 0).
	def(sched.AllGather, "bruck", bruckAllGather, bruckAllGatherCost),
	// AllGather rd: recursive doubling at a power-of-two n (each round
	// swaps the contiguous blocks gathered so far), Bruck otherwise;
	// unequal counts allowed. It comes after bruck, which it equals where
	// it falls back.
	def(sched.AllGather, "rd", rdAllGather, rdAllGatherCost),

	// ReduceScatter ring: n−1 ring steps, unequal counts allowed.
	// Scratch 2·max Counts.
	def(sched.ReduceScatter, "ring", ringReduceScatter, ringReduceScatterCost),
	// ReduceScatter rh: recursive halving with the extra ranks folded into
	// a partner, unequal counts allowed. Scratch about T/2 (T on folding
	// ranks).
	def(sched.ReduceScatter, "rh", rhReduceScatter, rhReduceScatterCost),
	// ReduceScatter pairwise: in step k every rank sends its input block of
	// rank r+k straight there and reduces what r−k sends into its own;
	// unequal counts allowed. No scratch.
	def(sched.ReduceScatter, "pairwise", pairwiseReduceScatter, pairwiseReduceScatterCost),

	// AllToAll pairwise: out of place, in step k rank r sends to r+k and
	// receives from r−k; in place, ranks exchange in symmetric pairs
	// (r with k−r mod n) through two scratch slots.
	// Scratch 0 (2·max block in place).
	def(sched.AllToAll, "pairwise", pairwiseAllToAll, pairwiseAllToAllCost),
	// AllToAll linear: every send and receive posted in a single step.
	// Scratch 0 (Σ column − own block in place).
	def(sched.AllToAll, "linear", linearAllToAll, linearAllToAllCost),
	// AllToAll bruck: ⌈log2 n⌉ rounds; in the round at distance 2^k every
	// rank packs the blocks whose rank-relative index has bit k set, sends
	// them to r+2^k and unpacks what r−2^k sends. For small messages, and
	// only for uniform calls (it forwards other ranks' blocks, whose sizes
	// a rank of an AllToAllV does not know). Scratch: two packs of about
	// half the row, and the row itself in place.
	def(sched.AllToAll, "bruck", bruckAllToAll, bruckAllToAllCost).only(uniformMatrix, uniformRowColumn),

	// Gather linear: the root receives from every rank in one step.
	def(sched.Gather, "linear", linearGather, linearGatherCost),
	// Gather binomial: recursive halving tree of contiguous rank ranges;
	// each sub-root forwards its range's blocks in one message. Scratch
	// on sub-roots: their range's elements.
	def(sched.Gather, "binomial", binomialGather, binomialGatherCost),

	// Scatter linear: the root sends to every rank in one step.
	def(sched.Scatter, "linear", linearScatter, linearGatherCost),
	// Scatter binomial: Gather binomial reversed. Scratch on sub-roots:
	// their range's elements.
	def(sched.Scatter, "binomial", binomialScatter, binomialGatherCost),

	// Barrier dissemination: in round k rank r signals r+2^k and waits
	// for r−2^k, with zero-length messages.
	def(sched.Barrier, "dissemination", disseminationBarrier, disseminationBarrierCost),
}

// register appends a to the registry; it is for init functions of files
// that keep an algorithm apart from the list above.
func register(a Algorithm) { algorithms = append(algorithms, a) }

// def wraps an implementation into an Algorithm that validates its input.
func def(c sched.Coll, name string, build builder, cost func(Shape) Cost) Algorithm {
	return Algorithm{
		Name:     name,
		Coll:     c,
		Supports: func(s sched.Spec) bool { return s.Coll == c && s.N >= 1 },
		Build: func(s sched.Spec, rank int) (*sched.Program, error) {
			if s.Coll != c {
				return nil, fmt.Errorf("algo: %s %s cannot build %s", c, name, s.Coll)
			}
			if err := checkSpec(s, rank); err != nil {
				return nil, err
			}
			p := newProg(s, rank)
			build(p)
			return p.program(name), nil
		},
		Cost: func(sh Shape) Cost {
			if sh.P > 1 {
				return cost(sh)
			}
			if sh.InPlace || c == sched.Broadcast || c == sched.Barrier {
				return Cost{}
			}
			return Cost{Delta: 1} // one rank copies In to Out
		},
	}
}

// only restricts a to the specs supports accepts, as the planner sees them.
// Build checks with check instead, which reads only what the rank knows at
// run time (for AllToAll, its row and column).
func (a Algorithm) only(supports func(s sched.Spec) bool, check func(s sched.Spec, rank int) bool) Algorithm {
	all := a.Supports
	a.Supports = func(s sched.Spec) bool { return all(s) && supports(s) }
	build := a.Build
	a.Build = func(s sched.Spec, rank int) (*sched.Program, error) {
		if s.Coll == a.Coll && checkSpec(s, rank) == nil && !check(s, rank) {
			return nil, fmt.Errorf("algo: %s %s does not support this call", a.Coll, a.Name)
		}
		return build(s, rank)
	}
	return a
}

// All returns every algorithm, grouped by collective.
func All() []Algorithm {
	out := slices.Clone(algorithms)
	slices.SortStableFunc(out, func(a, b Algorithm) int { return int(a.Coll) - int(b.Coll) })
	return out
}

// For returns the algorithms implementing collective c.
func For(c sched.Coll) []Algorithm {
	var out []Algorithm
	for _, a := range algorithms {
		if a.Coll == c {
			out = append(out, a)
		}
	}
	return out
}

// Lookup returns the algorithm named name for collective c.
func Lookup(c sched.Coll, name string) (Algorithm, bool) {
	for _, a := range algorithms {
		if a.Coll == c && a.Name == name {
			return a, true
		}
	}
	return Algorithm{}, false
}

// checkSpec validates what rank can know of s. For AllToAll it reads only
// row and column rank of the matrix.
func checkSpec(s sched.Spec, rank int) error {
	if s.N < 1 {
		return fmt.Errorf("algo: %d ranks", s.N)
	}
	if rank < 0 || rank >= s.N {
		return fmt.Errorf("algo: rank %d outside [0,%d)", rank, s.N)
	}
	if s.Coll.Rooted() && (s.Root < 0 || s.Root >= s.N) {
		return fmt.Errorf("algo: root %d outside [0,%d)", s.Root, s.N)
	}
	switch s.Coll {
	case sched.Barrier:
		return nil
	case sched.AllToAll:
		if len(s.Matrix) != s.N {
			return fmt.Errorf("algo: AllToAll matrix has %d rows for %d ranks", len(s.Matrix), s.N)
		}
		if len(s.Matrix[rank]) != s.N {
			return fmt.Errorf("algo: AllToAll matrix row %d has %d entries for %d ranks", rank, len(s.Matrix[rank]), s.N)
		}
		for k := range s.N {
			if len(s.Matrix[k]) <= rank {
				return fmt.Errorf("algo: AllToAll matrix row %d has %d entries for %d ranks", k, len(s.Matrix[k]), s.N)
			}
			if s.Matrix[rank][k] < 0 || s.Matrix[k][rank] < 0 {
				return fmt.Errorf("algo: negative AllToAll count between ranks %d and %d", rank, k)
			}
			if s.InPlace && s.Matrix[rank][k] != s.Matrix[k][rank] {
				return fmt.Errorf("algo: in-place AllToAll needs a symmetric matrix (ranks %d and %d)", rank, k)
			}
		}
		return nil
	}
	if len(s.Counts) != s.N {
		return fmt.Errorf("algo: %d counts for %d ranks", len(s.Counts), s.N)
	}
	for i, c := range s.Counts {
		if c < 0 {
			return fmt.Errorf("algo: negative count %d for rank %d", c, i)
		}
		if (s.Coll == sched.AllReduce || s.Coll == sched.Reduce || s.Coll == sched.Broadcast) && c != s.Counts[0] {
			return fmt.Errorf("algo: %s needs equal counts", s.Coll)
		}
	}
	return nil
}

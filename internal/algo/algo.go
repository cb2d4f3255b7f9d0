// Package algo holds hcomm's collective algorithms. Each one is a pure
// function from a collective (a sched.Spec) and a rank to the sched.Program
// that rank executes: no I/O, no randomness, no shared state. The same
// program is run by the executor (internal/exec), checked by sched.Verify
// and timed by internal/sim's discrete-event model (hcomm sim). All, For
// and Lookup list them; Algorithm.Name is what HCOMM_ALGO selects.
//
// # Cost model
//
// Costs are given in the α–β–γ model: α is the latency of one message, β the
// time to move one element over a link, γ the time to reduce one element. n
// is the number of ranks; m the elements of a rank's vector (AllReduce,
// Reduce, Broadcast) or the total T = ΣCounts (AllGather, ReduceScatter,
// Gather, Scatter) or a rank's row sum (AllToAll); L = ⌈log2 n⌉, P =
// 2^⌊log2 n⌋ and f = 1 when n is not a power of two, else 0. "Steps" are
// message rounds on the critical path (the α factor), "sent" the elements
// the busiest rank sends (the β factor), "reduced" the elements it reduces
// (the γ factor). Chain and dbtree use forwarding ops the executor
// pipelines: cut into k chunks, a chain of s hops takes about
// (s+k−1)·(α+β·m/k) instead of s·(α+β·m).
//
//	coll           algo           steps          sent               reduced          scratch
//	AllReduce      ring           2(n−1)         2(n−1)/n·m         (n−1)/n·m        0
//	AllReduce      rd             log2 P + 2f    (log2 P + f)·m     (log2 P + f)·m   m
//	AllReduce      hd             2·log2 P + 2f  2(P−1)/P·m + f·m   (P−1)/P·m + f·m  0
//	AllReduce      dbtree         ≈ 2·log2 n     ≤ 2m (piped)       ≤ m              0
//	Reduce         binomial       L              m                  L·m (root)       m off root
//	Reduce         chain          n−1 (piped)    m                  m                m off root
//	Reduce         rsg            n              m                  (n−1)/n·m        2⌈m/n⌉ off root
//	Broadcast      binomial       L              L·m (root)         -                0
//	Broadcast      chain          n−1 (piped)    m                  -                0
//	Broadcast      sag            L + n−1        ≈ 2(n−1)/n·m       -                0
//	AllGather      ring           n−1            T − own            -                0
//	AllGather      bruck          L              T − own            -                T (0 on rank 0)
//	ReduceScatter  ring           n−1            T − own            T − own          2·max count
//	ReduceScatter  rh             log2 P + 2f    ≈ (P−1)/P·T + f·T  as sent          ≈ T/2 (T folded)
//	AllToAll       pairwise       n−1 (n+1 ip)   m − own            -                0 (2·max block ip)
//	AllToAll       linear         1 (2 ip)       m − own            -                0 (m − own ip)
//	Gather         linear         1              T to root          -                0
//	Gather         binomial       L              T to root          -                range on sub-roots
//	Scatter        linear         1              T (root)           -                0
//	Scatter        binomial       L              T (root)           -                range on sub-roots
//	Barrier        dissemination  L              L empty messages   -                0
//
// ("ip": in place.) The comment on each registry entry in the source repeats
// its line next to a description of the algorithm.
package algo

import (
	"fmt"
	"slices"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// Algorithm builds per-rank programs for one collective.
type Algorithm struct {
	// Name is short and lower case; it is what HCOMM_ALGO selects.
	Name string
	// Coll is the collective the algorithm implements.
	Coll sched.Coll
	// Supports reports whether Build accepts the spec. Every algorithm
	// supports every number of ranks and every count, including 0.
	Supports func(s sched.Spec) bool
	// Build returns the program rank executes for s. It is deterministic
	// and reads only what rank knows at run time (for AllToAll: row and
	// column rank of s.Matrix).
	Build func(s sched.Spec, rank int) (*sched.Program, error)
}

// builder is the signature shared by the algorithm implementations. The spec
// has been checked by checkSpec before it is called.
type builder func(p *prog)

// algorithms is the registry, grouped by collective. The order within a
// collective is the order For returns.
var algorithms = []Algorithm{
	// AllReduce ring: reduce-scatter then allgather around the ring.
	// Steps 2(n−1); sent 2(n−1)/n·m; reduced (n−1)/n·m.
	def(sched.AllReduce, "ring", ringAllReduce),
	// AllReduce rd: recursive doubling on whole vectors; the n−P extra
	// ranks fold into a partner first and get the result back at the end.
	// Steps log2 P + 2f; sent (log2 P + f)·m; reduced (log2 P + f)·m.
	// Scratch m.
	def(sched.AllReduce, "rd", rdAllReduce),
	// AllReduce hd: recursive-halving reduce-scatter and recursive-doubling
	// allgather (Rabenseifner), with the same fold as rd.
	// Steps 2·log2 P + 2f; sent 2(P−1)/P·m + f·m; reduced (P−1)/P·m + f·m.
	def(sched.AllReduce, "hd", hdAllReduce),
	// AllReduce dbtree: two complementary binary trees, each reducing then
	// broadcasting half of the vector, both at once; every rank is a leaf
	// in at least one tree. Steps about 2·⌊log2 n⌋ message slots (up and
	// down each tree, both trees at once; at most 6 steps per rank, the
	// forwarding ops pipelined); sent at most 2m (m/2 up plus m down in
	// the tree where the rank is inner, m/2 up in the other); reduced at
	// most m.
	def(sched.AllReduce, "dbtree", dbtreeAllReduce),

	// Reduce binomial: binomial tree toward the root.
	// Steps L; sent m; reduced L·m at the root. Scratch m on inner ranks.
	def(sched.Reduce, "binomial", binomialReduce),
	// Reduce chain: one pipelined chain root+n−1 → … → root+1 → root.
	// Steps n−1 (pipelined); sent m; reduced m. Scratch m on inner ranks.
	def(sched.Reduce, "chain", chainReduce),
	// Reduce rsg: ring reduce-scatter, then every rank sends its reduced
	// block to the root.
	// Steps n; sent m (the root receives (n−1)/n·m in the last step);
	// reduced (n−1)/n·m. Scratch 2⌈m/n⌉ on ranks other than the root.
	def(sched.Reduce, "rsg", rsgReduce),

	// Broadcast binomial: binomial tree from the root.
	// Steps L; sent L·m at the root.
	def(sched.Broadcast, "binomial", binomialBroadcast),
	// Broadcast chain: one pipelined chain root → root+1 → … → root+n−1.
	// Steps n−1 (pipelined); sent m.
	def(sched.Broadcast, "chain", chainBroadcast),
	// Broadcast sag: binomial scatter of n blocks, then ring allgather
	// (van de Geijn).
	// Steps L + n−1; sent about 2(n−1)/n·m.
	def(sched.Broadcast, "sag", sagBroadcast),

	// AllGather ring: n−1 ring steps, unequal counts allowed.
	// Steps n−1; sent T − Counts[r].
	def(sched.AllGather, "ring", ringAllGather),
	// AllGather bruck: ⌈log2 n⌉ rounds at distances 1, 2, 4, …, gathered
	// in rank-relative order in scratch and rotated into place at the end;
	// unequal counts allowed.
	// Steps L; sent T − Counts[r]; Scratch T (none on rank 0).
	def(sched.AllGather, "bruck", bruckAllGather),

	// ReduceScatter ring: n−1 ring steps, unequal counts allowed.
	// Steps n−1; sent T − Counts[r]; reduced T − Counts[r].
	// Scratch 2·max Counts.
	def(sched.ReduceScatter, "ring", ringReduceScatter),
	// ReduceScatter rh: recursive halving with the extra ranks folded into
	// a partner, unequal counts allowed.
	// Steps log2 P + 2f; sent about (P−1)/P·T + f·T; reduced the same.
	// Scratch about T/2 (T on folding ranks).
	def(sched.ReduceScatter, "rh", rhReduceScatter),

	// AllToAll pairwise: out of place, in step k rank r sends to r+k and
	// receives from r−k; in place, ranks exchange in symmetric pairs
	// (r with k−r mod n) through two scratch slots.
	// Steps n−1 (n+1 in place); sent Σ row − own block.
	// Scratch 0 (2·max block in place).
	def(sched.AllToAll, "pairwise", pairwiseAllToAll),
	// AllToAll linear: every send and receive posted in a single step.
	// Steps 1 (2 in place); sent Σ row − own block.
	// Scratch 0 (Σ column − own block in place).
	def(sched.AllToAll, "linear", linearAllToAll),

	// Gather linear: the root receives from every rank in one step.
	// Steps 1; received T at the root.
	def(sched.Gather, "linear", linearGather),
	// Gather binomial: recursive halving tree of contiguous rank ranges;
	// each sub-root forwards its range's blocks in one message.
	// Steps L; received about T at the root. Scratch on sub-roots: their
	// range's elements.
	def(sched.Gather, "binomial", binomialGather),

	// Scatter linear: the root sends to every rank in one step.
	// Steps 1; sent T at the root.
	def(sched.Scatter, "linear", linearScatter),
	// Scatter binomial: Gather binomial reversed.
	// Steps L; sent about T at the root. Scratch on sub-roots: their
	// range's elements.
	def(sched.Scatter, "binomial", binomialScatter),

	// Barrier dissemination: in round k rank r signals r+2^k and waits
	// for r−2^k, with zero-length messages.
	// Steps L; sent L empty messages.
	def(sched.Barrier, "dissemination", disseminationBarrier),
}

// def wraps an implementation into an Algorithm that validates its input.
func def(c sched.Coll, name string, build builder) Algorithm {
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
	}
}

// All returns every algorithm, grouped by collective.
func All() []Algorithm { return slices.Clone(algorithms) }

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

package algo

import (
	"math"
	"math/bits"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// prog accumulates the steps of one rank's program and knows the rank's view
// of the spec: its count, block displacements and buffer aliasing.
type prog struct {
	s     sched.Spec
	n     int
	rank  int
	alias sched.Alias
	// empty keeps zero-length messages (Barrier is made of them). Other
	// collectives drop them: both ends compute the same length, so they
	// drop the same messages.
	empty bool
	// keep appends a step even when every op of it was left out, so
	// that the step numbers of programs built alike agree (parts laid
	// over each other: pipeReduceScatter).
	keep    bool
	ops     []sched.Op // backing store of the steps' ops
	steps   []sched.Step
	scratch int // scratch elements used so far
}

func newProg(s sched.Spec, rank int) *prog {
	return &prog{s: s, n: s.N, rank: rank, alias: s.AliasOf(rank), empty: s.Coll == sched.Barrier}
}

// count returns rank r's count.
func (p *prog) count(r int) int { return p.s.Count(r) }

// displs returns the block displacements of Counts: displs[b] is where block b
// starts and displs[n] is the total.
func (p *prog) displs() []int {
	d := make([]int, p.n+1)
	for b := range p.n {
		d[b+1] = d[b] + p.s.Counts[b]
	}
	return d
}

// in returns the region [off, off+n) of In. When the call is in place and the
// region lies in storage shared with Out, the Out region naming the same
// storage is returned instead, so that copies that became no-ops are seen as
// such and reads and writes of one storage carry one name.
func (p *prog) in(off, n int) sched.Region {
	a := p.alias
	switch {
	case !a.Aliased:
	case p.s.Coll == sched.ReduceScatter || p.s.Coll == sched.Scatter:
		// Out[i] is In[OutOff+i] for i < count.
		if c := p.count(p.rank); off >= a.OutOff && off+n <= a.OutOff+c {
			return sched.R(sched.Out, off-a.OutOff, n)
		}
	default:
		// In[i] is Out[InOff+i].
		return sched.R(sched.Out, a.InOff+off, n)
	}
	return sched.R(sched.In, off, n)
}

func out(off, n int) sched.Region { return sched.R(sched.Out, off, n) }
func scr(off, n int) sched.Region { return sched.R(sched.Scratch, off, n) }

// step appends one step made of ops, leaving out copies onto themselves and,
// unless p.empty, zero-length ops.
func (p *prog) step(ops ...sched.Op) {
	start := len(p.ops)
	for _, op := range ops {
		if op.Kind == sched.Copy && op.Src == op.Dst {
			continue
		}
		if op.Len() == 0 && (!p.empty || op.Kind == sched.Copy || op.Kind == sched.LocalReduce) {
			continue
		}
		p.ops = append(p.ops, op)
		for _, r := range [...]sched.Region{op.Src, op.Dst} {
			if r.Buf == sched.Scratch && r.Len > 0 {
				p.scratch = max(p.scratch, r.End())
			}
		}
	}
	if end := len(p.ops); end > start || p.keep {
		// Steps share one backing array; the capacity limit keeps an
		// append to one step from overwriting the next.
		p.steps = append(p.steps, sched.Step{Ops: p.ops[start:end:end]})
	}
}

// program returns the finished program, with Scratch set to the scratch
// elements its ops use.
func (p *prog) program(name string) *sched.Program {
	return &sched.Program{Rank: p.rank, Size: p.n, Algo: name, Scratch: p.scratch, Steps: p.steps}
}

// mod returns a mod n in [0, n).
func mod(a, n int) int {
	a %= n
	if a < 0 {
		a += n
	}
	return a
}

// floorPow2 returns the largest power of two not above n (n >= 1).
func floorPow2(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

// blocks splits count elements into n nearly equal blocks as sched.Block
// does: off(b), for b in [0, n], is where block b starts (off(n) == count) and
// size(b) its length.
type blocks struct{ count, n int }

func (bl blocks) off(b int) int {
	if b >= bl.n {
		return bl.count
	}
	o, _ := sched.Block(bl.count, bl.n, b)
	return o
}

func (bl blocks) size(b int) int {
	_, l := sched.Block(bl.count, bl.n, b)
	return l
}

// span returns the elements of blocks [lo, hi) as offset and length.
func (bl blocks) span(lo, hi int) (off, n int) {
	o := bl.off(lo)
	return o, bl.off(hi) - o
}

// ceilLog2 returns ⌈log2 n⌉ (0 for n <= 1).
func ceilLog2(n int) int { return bits.Len(uint(max(n, 1) - 1)) }

// floorLog2 returns ⌊log2 n⌋ (n >= 1).
func floorLog2(n int) int { return bits.Len(uint(n)) - 1 }

// frac returns (p−1)/p.
func frac(p int) float64 { return float64(p-1) / float64(p) }

// ownCopy returns the δ term of copying a rank's own block of p (1/p of the
// call) when the call is not in place.
func ownCopy(sh Shape) float64 {
	if sh.InPlace {
		return 0
	}
	return 1 / float64(sh.P)
}

// chunks returns how many pieces the executor cuts a forwarded message of
// msg units into, given sh.Chunk (1 when it does not pipeline).
func chunks(sh Shape, msg float64) float64 {
	if sh.Chunk <= 0 || msg <= sh.Chunk {
		return 1
	}
	return math.Ceil(msg / sh.Chunk)
}

package algo

import "github.com/hcomm-go/hcomm/internal/sched"

// linearGather: the root receives every block in one step.
func linearGather(p *prog) {
	r, root := p.rank, p.s.Root
	c := p.count(r)
	if r != root {
		p.step(sched.SendOp(root, p.in(0, c)))
		return
	}
	d := p.displs()
	ops := []sched.Op{sched.CopyOp(p.in(0, c), out(d[r], c))}
	for q := range p.n {
		if q != root {
			ops = append(ops, sched.RecvOp(q, out(d[q], p.count(q))))
		}
	}
	p.step(ops...)
}

// linearScatter: the root sends every block in one step.
func linearScatter(p *prog) {
	r, root := p.rank, p.s.Root
	c := p.count(r)
	if r != root {
		p.step(sched.RecvOp(root, out(0, c)))
		return
	}
	d := p.displs()
	ops := []sched.Op{sched.CopyOp(p.in(d[r], c), out(0, c))}
	for q := range p.n {
		if q != root {
			ops = append(ops, sched.SendOp(q, p.in(d[q], p.count(q))))
		}
	}
	p.step(ops...)
}

// halvingEvent is one message of the halving tree seen from one rank: the
// rank is root of a range that splits, and either it exchanges the other
// half's blocks with that half's sub-root (toRoot false) or it is that
// sub-root and exchanges its half with the range's root (toRoot true).
type halvingEvent struct {
	peer   int
	lo, hi int // the relative ranks whose blocks the message carries
	toRoot bool
}

// halvingTree walks the tree that Gather and Scatter binomial use, on ranks
// relative to the root (relative rank v is rank root+v mod n): the range
// [0, n), rooted at 0, splits into [0, ⌈n/2⌉), which its root keeps, and
// the rest, rooted at its first rank; both halves split again until they
// hold one rank. The root always keeps the larger half, so it moves
// (n−1)/n of the data whatever its rank. It returns rank's messages,
// outermost split first.
func halvingTree(n, root, rank int) []halvingEvent {
	rl := relative{n, root}
	v := rl.of(rank)
	var ev []halvingEvent
	lo, hi := 0, n
	for hi-lo > 1 {
		mid := lo + (hi-lo+1)/2
		switch {
		case v == lo:
			ev = append(ev, halvingEvent{peer: rl.real(mid), lo: mid, hi: hi})
		case v == mid:
			ev = append(ev, halvingEvent{peer: rl.real(lo), lo: mid, hi: hi, toRoot: true})
		}
		if v < mid {
			hi = mid
		} else {
			lo = mid
		}
	}
	return ev
}

// treeLayout places the blocks of the halving tree. Sub-roots keep their
// range in Scratch in relative order, one contiguous region; the root's
// buffer is in rank order, where a range that passes rank n−1 is in two
// pieces.
type treeLayout struct {
	n, root int
	d       []int // displacements in rank order
	rd      []int // displacements in relative order
}

func newTreeLayout(p *prog) treeLayout {
	d := p.displs()
	rl := relative{p.n, p.s.Root}
	rd := make([]int, p.n+1)
	for v := range p.n {
		rd[v+1] = rd[v] + p.count(rl.real(v))
	}
	return treeLayout{n: p.n, root: p.s.Root, d: d, rd: rd}
}

// size returns the elements of the relative ranks [lo, hi).
func (l treeLayout) size(lo, hi int) int { return l.rd[hi] - l.rd[lo] }

// pieces returns where the blocks of relative ranks [lo, hi) lie in the
// root's buffer: one region [off, off+n) or, when the range wraps past
// rank n−1, two: the first n1 elements of the range at off1 and the rest
// at 0.
func (l treeLayout) pieces(lo, hi int) (off, n1 int, wraps bool) {
	a := l.root + lo
	if a >= l.n || l.root+hi <= l.n {
		return l.d[a%l.n], l.size(lo, hi), false
	}
	return l.d[a], l.d[l.n] - l.d[a], true
}

// binomialGather gathers up the halving tree, innermost splits first. A
// sub-root collects its range in Scratch (its own block included) and
// forwards it in one message; the root receives straight into Out, except a
// range that wraps past rank n−1, which arrives in Scratch and is copied
// into its two places with the next step.
func binomialGather(p *prog) {
	r := p.rank
	c := p.count(r)
	l := newTreeLayout(p)
	v := relative{p.n, l.root}.of(r)
	ev := halvingTree(p.n, l.root, r)
	var extra []sched.Op // ops to run with the next step
	base := 0            // where this sub-root's range starts, relative
	if v == 0 {
		extra = append(extra, sched.CopyOp(p.in(0, c), out(l.d[r], c)))
	} else if len(ev) > 1 {
		// ev[0] is the message to the parent; the rest are receives.
		base = l.rd[ev[0].lo]
		extra = append(extra, sched.CopyOp(p.in(0, c), scr(l.rd[v]-base, c)))
	}
	for i := len(ev) - 1; i >= 0; i-- {
		e := ev[i]
		size := l.size(e.lo, e.hi)
		ops := extra
		extra = nil
		switch {
		case e.toRoot && e.hi-e.lo == 1:
			ops = append(ops, sched.SendOp(e.peer, p.in(0, c)))
		case e.toRoot:
			ops = append(ops, sched.SendOp(e.peer, scr(0, size)))
		case v != 0:
			ops = append(ops, sched.RecvOp(e.peer, scr(l.rd[e.lo]-base, size)))
		default:
			off, n1, wraps := l.pieces(e.lo, e.hi)
			if !wraps {
				ops = append(ops, sched.RecvOp(e.peer, out(off, size)))
				break
			}
			ops = append(ops, sched.RecvOp(e.peer, scr(0, size)))
			extra = []sched.Op{sched.CopyOp(scr(0, n1), out(off, n1)), sched.CopyOp(scr(n1, size-n1), out(0, size-n1))}
		}
		p.step(ops...)
	}
	p.step(extra...)
}

// binomialScatter scatters down the halving tree, outermost splits first. A
// sub-root receives its range in Scratch (straight into Out when the range is
// its own block alone) and forwards the parts of its sub-ranges. The root
// sends from In, except a range that wraps past rank n−1, which it first
// copies into Scratch. Ranks copy their own block out with their last send
// (to a single rank), so that the copy delays no other.
func binomialScatter(p *prog) {
	r := p.rank
	c := p.count(r)
	l := newTreeLayout(p)
	v := relative{p.n, l.root}.of(r)
	ev := halvingTree(p.n, l.root, r)
	if v == 0 {
		own := sched.CopyOp(p.in(l.d[r], c), out(0, c))
		var staged []sched.Op // copies of a wrapping range into Scratch
		for _, e := range ev {
			if off, n1, wraps := l.pieces(e.lo, e.hi); wraps {
				size := l.size(e.lo, e.hi)
				staged = []sched.Op{sched.CopyOp(p.in(off, n1), scr(0, n1)), sched.CopyOp(p.in(0, size-n1), scr(n1, size-n1))}
			}
		}
		for i, e := range ev {
			size := l.size(e.lo, e.hi)
			off, _, wraps := l.pieces(e.lo, e.hi)
			if wraps && i == 0 {
				p.step(staged...)
			}
			ops := []sched.Op{sched.SendOp(e.peer, p.in(off, size))}
			if wraps {
				ops[0] = sched.SendOp(e.peer, scr(0, size))
			}
			if i == 0 && !wraps {
				ops = append(ops, staged...)
			}
			if i == len(ev)-1 {
				ops = append(ops, own)
			}
			p.step(ops...)
		}
		if len(ev) == 0 {
			p.step(own)
		}
		return
	}
	// ev[0] brings this rank's range; the rest send parts of it on.
	e0 := ev[0]
	if e0.hi-e0.lo == 1 {
		p.step(sched.RecvOp(e0.peer, out(0, c)))
		return
	}
	base := l.rd[e0.lo]
	p.step(sched.RecvOp(e0.peer, scr(0, l.size(e0.lo, e0.hi))))
	for i, e := range ev[1:] {
		ops := []sched.Op{sched.SendOp(e.peer, scr(l.rd[e.lo]-base, l.size(e.lo, e.hi)))}
		if i == len(ev)-2 {
			ops = append(ops, sched.CopyOp(scr(l.rd[v]-base, c), out(0, c)))
		}
		p.step(ops...)
	}
}

// linearGatherCost: the root receives (Scatter: sends) the p−1 other blocks
// one after the other, and out of place copies its own.
func linearGatherCost(sh Shape) Cost {
	return Cost{Alpha: float64(sh.P - 1), Beta: frac(sh.P), Delta: ownCopy(sh)}
}

// binomialGatherCost: ⌈log2 p⌉ rounds; the root receives (Scatter: sends)
// the p−1 other blocks, the smaller halves first (last), and no sub-root
// keeps it waiting. Copies: a block (the root's own out of place, else a
// sub-root's, if there is one), and the range that wraps past rank p−1, if
// one does, through Scratch.
func binomialGatherCost(sh Shape) Cost {
	p := sh.P
	c := Cost{Alpha: float64(ceilLog2(p)), Beta: frac(p), Delta: ownCopy(sh)}
	if sh.InPlace && p >= 4 {
		c.Delta = 1 / float64(p)
	}
	for _, e := range halvingTree(p, sh.Root, sh.Root) {
		if w := p - sh.Root; e.lo < w && w < e.hi {
			c.Delta += float64(e.hi-e.lo) / float64(p)
		}
	}
	return c
}

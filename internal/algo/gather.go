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
	lo, hi int // the ranks whose blocks the message carries
	toRoot bool
}

// halvingTree walks the tree that Gather and Scatter binomial use: the range
// of ranks [0, n) with its root splits into two halves of sizes ⌈k/2⌉ and
// ⌊k/2⌋; the root keeps its half and the first rank of the other half becomes
// that half's root; both halves split again until they hold one rank. Every
// range is contiguous, so its blocks are contiguous in the root's buffer.
// It returns rank's messages, outermost split first.
func halvingTree(n, root, rank int) []halvingEvent {
	var ev []halvingEvent
	lo, hi, rt := 0, n, root
	for hi-lo > 1 {
		mid := lo + (hi-lo+1)/2
		aLo, aHi, bLo, bHi := lo, mid, mid, hi
		if rt >= mid {
			aLo, aHi, bLo, bHi = mid, hi, lo, mid
		}
		sub := bLo
		switch {
		case rank >= aLo && rank < aHi:
			if rank == rt {
				ev = append(ev, halvingEvent{peer: sub, lo: bLo, hi: bHi})
			}
			lo, hi = aLo, aHi
		default:
			if rank == sub {
				ev = append(ev, halvingEvent{peer: rt, lo: bLo, hi: bHi, toRoot: true})
			}
			lo, hi, rt = bLo, bHi, sub
		}
	}
	return ev
}

// binomialGather gathers up the halving tree, innermost splits first. A
// sub-root collects its range in Scratch (its own block included) and
// forwards it in one message; the root receives straight into Out.
func binomialGather(p *prog) {
	r, root := p.rank, p.s.Root
	c := p.count(r)
	d := p.displs()
	ev := halvingTree(p.n, root, r)
	// Where the blocks of ranks [lo, hi) go on this rank.
	base, buf := 0, sched.Out
	var first []sched.Op
	if r == root {
		first = append(first, sched.CopyOp(p.in(0, c), out(d[r], c)))
	} else if len(ev) > 1 {
		// ev[0] is the message to the parent; the rest are receives.
		base, buf = d[ev[0].lo], sched.Scratch
		first = append(first, sched.CopyOp(p.in(0, c), scr(d[r]-base, c)))
	}
	for i := len(ev) - 1; i >= 0; i-- {
		e := ev[i]
		span := sched.R(buf, d[e.lo]-base, d[e.hi]-d[e.lo])
		if e.toRoot {
			if e.hi-e.lo == 1 {
				span = p.in(0, c)
			}
			p.step(append(first, sched.SendOp(e.peer, span))...)
		} else {
			p.step(append(first, sched.RecvOp(e.peer, span))...)
		}
		first = nil
	}
	p.step(first...)
}

// binomialScatter scatters down the halving tree, outermost splits first. A
// sub-root receives its range in Scratch (straight into Out when the range is
// its own block alone), forwards the parts of its sub-ranges and copies its
// own block out.
func binomialScatter(p *prog) {
	r, root := p.rank, p.s.Root
	c := p.count(r)
	d := p.displs()
	ev := halvingTree(p.n, root, r)
	var own sched.Op
	base, src := 0, func(off, n int) sched.Region { return p.in(off, n) }
	if r == root {
		own = sched.CopyOp(p.in(d[r], c), out(0, c))
	} else if len(ev) > 1 {
		base, src = d[ev[0].lo], scr
		own = sched.CopyOp(scr(d[r]-d[ev[0].lo], c), out(0, c))
	}
	for i, e := range ev {
		if e.toRoot {
			dst := out(0, c)
			if e.hi-e.lo > 1 {
				dst = scr(0, d[e.hi]-d[e.lo])
			}
			p.step(sched.RecvOp(e.peer, dst))
			continue
		}
		ops := []sched.Op{sched.SendOp(e.peer, src(d[e.lo]-base, d[e.hi]-d[e.lo]))}
		if i == 0 || (i == 1 && r != root) {
			if own.Kind != 0 {
				ops = append(ops, own)
			}
		}
		p.step(ops...)
	}
	if r == root && len(ev) == 0 {
		p.step(own)
	}
}

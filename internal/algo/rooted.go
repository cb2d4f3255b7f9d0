package algo

import "github.com/hcomm-go/hcomm/internal/sched"

// relative maps ranks to ranks relative to the root and back.
type relative struct{ n, root int }

func (rl relative) of(r int) int   { return mod(r-rl.root, rl.n) }
func (rl relative) real(v int) int { return mod(v+rl.root, rl.n) }

// binomialReduce: in round k a rank whose relative rank has bit k set sends
// its partial sum to the rank without that bit and is done; the others
// reduce what they receive from the rank with that bit, if it exists.
// Ranks other than the root accumulate in Scratch.
func binomialReduce(p *prog) {
	n, c := p.n, p.count(p.rank)
	if n == 1 {
		copyInToOut(p, c)
		return
	}
	rl := relative{n, p.s.Root}
	vr := rl.of(p.rank)
	acc := scr(0, c)
	if vr == 0 {
		acc = out(0, c)
	}
	cur := p.in(0, c)
	for mask := 1; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			p.step(sched.SendOp(rl.real(vr-mask), cur))
			return
		}
		if vr+mask < n {
			p.step(sched.RecvReduceOp(rl.real(vr+mask), cur, acc))
			cur = acc
		}
	}
}

// chainReduce is one pipelined chain: relative rank n−1 sends, every rank
// between reduces what arrives from above and forwards it below, the root
// reduces last.
func chainReduce(p *prog) {
	n, c := p.n, p.count(p.rank)
	if n == 1 {
		copyInToOut(p, c)
		return
	}
	rl := relative{n, p.s.Root}
	vr := rl.of(p.rank)
	switch {
	case vr == n-1:
		p.step(sched.SendOp(rl.real(vr-1), p.in(0, c)))
	case vr == 0:
		p.step(sched.RecvReduceOp(rl.real(1), p.in(0, c), out(0, c)))
	default:
		p.step(sched.RecvReduceSendOp(rl.real(vr+1), rl.real(vr-1), p.in(0, c), scr(0, c)))
	}
}

// rsgReduce: a ring reduce-scatter leaves rank r with block r+1 fully
// reduced, then every rank sends its block to the root in one step. The root
// reduces in Out; the others keep their two live blocks in Scratch slots.
func rsgReduce(p *prog) {
	n, r, c := p.n, p.rank, p.count(p.rank)
	if n == 1 {
		copyInToOut(p, c)
		return
	}
	root := p.s.Root
	bl := blocks{c, n}
	slot := bl.size(0)
	loc := func(k, b int) sched.Region {
		if r == root {
			return out(bl.off(b), bl.size(b))
		}
		return scr((k%2)*slot, bl.size(b))
	}
	next, prev := mod(r+1, n), mod(r-1, n)
	for k := range n - 1 {
		sb, rb := mod(r-k, n), mod(r-k-1, n)
		src := p.in(bl.off(sb), bl.size(sb))
		if k > 0 {
			src = loc(k-1, sb)
		}
		p.step(sched.SendOp(next, src), sched.RecvReduceOp(prev, p.in(bl.off(rb), bl.size(rb)), loc(k, rb)))
	}
	if r != root {
		p.step(sched.SendOp(root, loc(n-2, next)))
		return
	}
	var gather []sched.Op
	for q := range n {
		if q != root {
			b := mod(q+1, n)
			gather = append(gather, sched.RecvOp(q, out(bl.off(b), bl.size(b))))
		}
	}
	p.step(gather...)
}

// binomialBroadcast: a rank receives from the rank below it that differs in
// its lowest set relative bit, then sends to the ranks above it that differ
// in one lower bit, the farthest first.
func binomialBroadcast(p *prog) {
	n, c := p.n, p.count(p.rank)
	rl := relative{n, p.s.Root}
	vr := rl.of(p.rank)
	data := out(0, c)
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			p.step(sched.RecvOp(rl.real(vr-mask), data))
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			p.step(sched.SendOp(rl.real(vr+mask), data))
		}
	}
}

// chainBroadcast is one pipelined chain from the root through increasing
// relative ranks.
func chainBroadcast(p *prog) {
	n, c := p.n, p.count(p.rank)
	if n == 1 {
		return
	}
	rl := relative{n, p.s.Root}
	vr := rl.of(p.rank)
	switch {
	case vr == 0:
		p.step(sched.SendOp(rl.real(1), out(0, c)))
	case vr == n-1:
		p.step(sched.RecvOp(rl.real(vr-1), out(0, c)))
	default:
		p.step(sched.RecvCopySendOp(rl.real(vr-1), rl.real(vr+1), out(0, c)))
	}
}

// sagBroadcast scatters the vector's n blocks down a binomial tree (relative
// rank v gets block v and the blocks of its subtree), then circulates them
// around the ring, skipping blocks the receiver already holds.
func sagBroadcast(p *prog) {
	n, c := p.n, p.count(p.rank)
	if n == 1 {
		return
	}
	rl := relative{n, p.s.Root}
	vr := rl.of(p.rank)
	bl := blocks{c, n}
	// subtree returns the size of relative rank v's subtree.
	subtree := func(v int) int {
		if v == 0 {
			s := 1
			for s < n {
				s *= 2
			}
			return s
		}
		return v & -v
	}
	has := func(v, b int) bool { return b >= v && b < v+subtree(v) }
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			o, l := bl.span(vr, min(vr+mask, n))
			p.step(sched.RecvOp(rl.real(vr-mask), out(o, l)))
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			o, l := bl.span(vr+mask, min(vr+2*mask, n))
			p.step(sched.SendOp(rl.real(vr+mask), out(o, l)))
		}
	}
	next, prev := mod(vr+1, n), mod(vr-1, n)
	for k := range n - 1 {
		var ops []sched.Op
		if b := mod(vr-k, n); !has(next, b) {
			ops = append(ops, sched.SendOp(rl.real(next), out(bl.off(b), bl.size(b))))
		}
		if b := mod(vr-k-1, n); !has(vr, b) {
			ops = append(ops, sched.RecvOp(rl.real(prev), out(bl.off(b), bl.size(b))))
		}
		p.step(ops...)
	}
}

// binomialReduceCost: ⌈log2 p⌉ rounds, the root receiving and reducing the
// whole vector in each.
func binomialReduceCost(sh Shape) Cost {
	l := float64(ceilLog2(sh.P))
	return Cost{Alpha: l, Beta: l, Gamma: l}
}

// chainCost prices a pipelined chain of p−1 hops, each moving (and, if
// reduce, reducing) the whole vector: cut into k pieces, the last piece
// leaves the first rank after k−1 pieces and takes p−1 hops, so the chain
// takes p+k−2 piece times.
func chainCost(sh Shape, reduce bool) Cost {
	k := chunks(sh, sh.N)
	t := float64(sh.P-2) + k
	c := Cost{Alpha: t, Beta: t / k}
	if reduce {
		c.Gamma = c.Beta
	}
	return c
}

func chainReduceCost(sh Shape) Cost    { return chainCost(sh, true) }
func chainBroadcastCost(sh Shape) Cost { return chainCost(sh, false) }

// rsgReduceCost: the ring reduce-scatter (p−1 steps of m/p), then the root
// receives the p−1 reduced blocks one after the other.
func rsgReduceCost(sh Shape) Cost {
	p := float64(sh.P)
	return Cost{Alpha: 2 * (p - 1), Beta: 2 * frac(sh.P), Gamma: frac(sh.P)}
}

// binomialBroadcastCost: ⌈log2 p⌉ rounds, the root sending the whole vector
// in each.
func binomialBroadcastCost(sh Shape) Cost {
	l := float64(ceilLog2(sh.P))
	return Cost{Alpha: l, Beta: l}
}

// sagBroadcastCost: the binomial scatter, ⌈log2 p⌉ messages moving
// (p−1)/p·m in all, then the p−1 steps of the ring allgather.
func sagBroadcastCost(sh Shape) Cost {
	return Cost{Alpha: float64(ceilLog2(sh.P) + sh.P - 1), Beta: 2 * frac(sh.P)}
}

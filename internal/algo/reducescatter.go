package algo

import "github.com/hcomm-go/hcomm/internal/sched"

// ringReduceScatter: in step k rank r sends the partial sum of block r−k−1 to
// r+1 and reduces block r−k−2 arriving from r−1 with its own input, so that
// the last step reduces block r straight into Out. The partial sums alive
// between steps live in two Scratch slots.
func ringReduceScatter(p *prog) {
	n, r := p.n, p.rank
	d := p.displs()
	c := p.count(r)
	cnt := func(b int) int { return d[b+1] - d[b] }
	if n == 1 {
		p.step(sched.CopyOp(p.in(0, c), out(0, c)))
		return
	}
	slot := 0
	for k := range n - 2 {
		slot = max(slot, cnt(mod(r-k-2, n)))
	}
	// loc is where the partial sum reduced in step k lives.
	loc := func(k, b int) sched.Region {
		if k == n-2 {
			return out(0, c)
		}
		return scr((k%2)*slot, cnt(b))
	}
	next, prev := mod(r+1, n), mod(r-1, n)
	for k := range n - 1 {
		sb, rb := mod(r-k-1, n), mod(r-k-2, n)
		src := p.in(d[sb], cnt(sb))
		if k > 0 {
			src = loc(k-1, sb)
		}
		p.step(sched.SendOp(next, src), sched.RecvReduceOp(prev, p.in(d[rb], cnt(rb)), loc(k, rb)))
	}
}

// rhReduceScatter is recursive halving. After the fold, the P active ranks
// own contiguous groups of blocks (a folded rank owns its partner's block and
// its own); in each round a rank keeps the half of its groups its renumbered
// rank's bit selects, sends the other half and reduces the kept half into
// Scratch, the last round straight into Out. A folded rank finally sends its
// partner's block back.
func rhReduceScatter(p *prog) {
	n, r := p.n, p.rank
	d := p.displs()
	total, c := d[n], p.count(r)
	if n == 1 {
		p.step(sched.CopyOp(p.in(0, c), out(0, c)))
		return
	}
	f := newFold(n)
	if f.idle(r) {
		p.step(sched.SendOp(r+1, p.in(0, total)))
		p.step(sched.RecvOp(r+1, out(0, c)))
		return
	}
	// elem(v) is where the group of renumbered rank v starts.
	elem := func(v int) int {
		if v >= f.pow {
			return total
		}
		return d[v+min(v, f.rem)]
	}
	base, reduced := 0, false
	src := func(lo, hi int) sched.Region {
		if reduced {
			return scr(lo-base, hi-lo)
		}
		return p.in(lo, hi-lo)
	}
	if f.folded(r) {
		p.step(sched.RecvReduceOp(r-1, p.in(0, total), scr(0, total)))
		reduced = true
	}
	v := f.vrank(r)
	lo, hi := 0, f.pow
	for dist := f.pow / 2; dist >= 1; dist /= 2 {
		peer := f.real(v ^ dist)
		mid := lo + dist
		keepLo, keepHi, sendLo, sendHi := lo, mid, mid, hi
		if v&dist != 0 {
			keepLo, keepHi, sendLo, sendHi = mid, hi, lo, mid
		}
		ks, ke := elem(keepLo), elem(keepHi)
		send, keep := src(elem(sendLo), elem(sendHi)), src(ks, ke)
		if !reduced {
			base = ks
		}
		dst := scr(ks-base, ke-ks)
		if dist == 1 && !f.folded(r) {
			dst = out(0, c)
		}
		p.step(sched.SendOp(peer, send), sched.RecvReduceOp(peer, keep, dst))
		reduced = true
		lo, hi = keepLo, keepHi
	}
	if f.folded(r) {
		p.step(
			sched.SendOp(r-1, scr(d[r-1]-base, d[r]-d[r-1])),
			sched.CopyOp(scr(d[r]-base, c), out(0, c)),
		)
	}
}

// pairwiseReduceScatter: in step k rank r sends its input block of rank r+k
// straight to that rank and reduces the input block of its own that r−k
// sends into Out. No partial sum travels, so no step waits on another
// rank's reduction and nothing needs Scratch; each rank's block is reduced
// in the order r, r−1, r−2, ….
func pairwiseReduceScatter(p *prog) {
	n, r := p.n, p.rank
	d := p.displs()
	c := p.count(r)
	blk := func(b int) sched.Region { return p.in(d[b], d[b+1]-d[b]) }
	if n == 1 {
		p.step(sched.CopyOp(blk(r), out(0, c)))
		return
	}
	acc := blk(r)
	for k := 1; k < n; k++ {
		to, from := mod(r+k, n), mod(r-k, n)
		p.step(sched.SendOp(to, blk(to)), sched.RecvReduceOp(from, acc, out(0, c)))
		acc = out(0, c)
	}
}

// pairwiseReduceScatterCost: p−1 steps moving and reducing one block each.
func pairwiseReduceScatterCost(sh Shape) Cost {
	return Cost{Alpha: float64(sh.P - 1), Beta: frac(sh.P), Gamma: frac(sh.P)}
}

// ringReduceScatterCost: p−1 steps moving and reducing one block each.
func ringReduceScatterCost(sh Shape) Cost {
	return Cost{Alpha: float64(sh.P - 1), Beta: frac(sh.P), Gamma: frac(sh.P)}
}

// rhReduceScatterCost: log2 P halving rounds. At a power of two they move
// and reduce (P−1)/P·T in all. Otherwise the fold first moves and reduces
// the whole T, the renumbered ranks v < p−P own two blocks each, so the
// round at distance d moves the d + min(p−P, d) blocks of the lower half
// of the range of ranks 0..2d−1, and a folded rank finally sends its
// partner's block back and copies its own out of Scratch.
func rhReduceScatterCost(sh Shape) Cost {
	pw := 1 << floorLog2(sh.P)
	rounds := float64(floorLog2(sh.P))
	if pw == sh.P {
		return Cost{Alpha: rounds, Beta: frac(sh.P), Gamma: frac(sh.P)}
	}
	rem, blocks := sh.P-pw, 0
	for d := pw / 2; d >= 1; d /= 2 {
		blocks += d + min(rem, d)
	}
	halving, block := float64(blocks)/float64(sh.P), 1/float64(sh.P)
	return Cost{Alpha: rounds + 2, Beta: 1 + halving + block, Gamma: 1 + halving, Delta: block}
}

package algo

import "github.com/hcomm-go/hcomm/internal/sched"

// ringAllGather: rank r copies its block into place and, in step k, sends
// block r−k to r+1 while receiving block r−k−1 from r−1.
func ringAllGather(p *prog) {
	n, r := p.n, p.rank
	d := p.displs()
	blk := func(b int) sched.Region { b = mod(b, n); return out(d[b], d[b+1]-d[b]) }
	own := p.in(0, p.count(r))
	if n == 1 {
		p.step(sched.CopyOp(own, blk(r)))
		return
	}
	next, prev := mod(r+1, n), mod(r-1, n)
	for k := range n - 1 {
		if k == 0 {
			p.step(sched.SendOp(next, own), sched.CopyOp(own, blk(r)), sched.RecvOp(prev, blk(r-1)))
			continue
		}
		p.step(sched.SendOp(next, blk(r-k)), sched.RecvOp(prev, blk(r-k-1)))
	}
}

// bruckAllGather: in round k rank r sends the blocks of ranks r, r+1, …,
// r+m−1 (m = min(2^k, n−2^k)) to r−2^k and receives those of r+2^k, … from
// r+2^k. The blocks are kept in rank-relative order (own block first) so that
// every message is one contiguous region, in Scratch, and rotated into Out at
// the end; rank 0's relative order is Out's order, so it works in Out.
func bruckAllGather(p *prog) {
	n, r := p.n, p.rank
	d := p.displs()
	total := d[n]
	c := p.count(r)
	own := p.in(0, c)
	// rel[j] is where the block of rank r+j starts in relative order.
	rel := make([]int, n+1)
	for j := range n {
		rel[j+1] = rel[j] + p.count(mod(r+j, n))
	}
	buf := sched.Scratch
	if r == 0 {
		buf = sched.Out
	}
	region := func(lo, hi int) sched.Region { return sched.R(buf, rel[lo], rel[hi]-rel[lo]) }
	if n == 1 {
		p.step(sched.CopyOp(own, out(0, c)))
		return
	}
	for h := 1; h < n; h *= 2 {
		m := min(h, n-h)
		to, from := mod(r-h, n), mod(r+h, n)
		recv := sched.RecvOp(from, region(h, h+m))
		if h == 1 {
			p.step(sched.SendOp(to, own), sched.CopyOp(own, region(0, 1)), recv)
			continue
		}
		p.step(sched.SendOp(to, region(0, m)), recv)
	}
	if r == 0 {
		return
	}
	// Relative blocks 0..n−r−1 are ranks r..n−1; the rest are ranks 0..r−1.
	// In place the own block is already in Out.
	skip := 0
	if p.alias.Aliased {
		skip = c
	}
	p.step(
		sched.CopyOp(scr(skip, rel[n-r]-skip), out(d[r]+skip, total-d[r]-skip)),
		sched.CopyOp(scr(rel[n-r], total-rel[n-r]), out(0, d[r])),
	)
}

// rdAllGather is recursive doubling, for a power of two n: before the round
// at distance d rank r holds the blocks of the d ranks of its aligned group
// (r with its low log2 d bits cleared, and up), one contiguous region of
// Out; it swaps that region with r XOR d, doubling the group. Other n fall
// back to bruckAllGather, which has the same message count, ⌈log2 n⌉, as
// MPICH's recursive doubling with its extra steps for the missing partners.
func rdAllGather(p *prog) {
	n, r := p.n, p.rank
	if n&(n-1) != 0 {
		bruckAllGather(p)
		return
	}
	d := p.displs()
	group := func(lo, size int) sched.Region { return out(d[lo], d[lo+size]-d[lo]) }
	own := p.in(0, p.count(r))
	if n == 1 {
		p.step(sched.CopyOp(own, group(r, 1)))
		return
	}
	for dist := 1; dist < n; dist *= 2 {
		mine, theirs := r&^(dist-1), (r^dist)&^(dist-1)
		if dist == 1 {
			p.step(sched.SendOp(r^1, own), sched.CopyOp(own, group(r, 1)), sched.RecvOp(r^1, group(theirs, 1)))
			continue
		}
		p.step(sched.SendOp(r^dist, group(mine, dist)), sched.RecvOp(r^dist, group(theirs, dist)))
	}
}

// rdAllGatherCost: log2 p rounds moving the p−1 other blocks in all, and out
// of place the copy of the own block; other p are priced as Bruck.
func rdAllGatherCost(sh Shape) Cost {
	if sh.P&(sh.P-1) != 0 {
		return bruckAllGatherCost(sh)
	}
	return Cost{Alpha: float64(floorLog2(sh.P)), Beta: frac(sh.P), Delta: ownCopy(sh)}
}

// ringAllGatherCost: p−1 steps moving one block each, and out of place the
// copy of the own block.
func ringAllGatherCost(sh Shape) Cost {
	return Cost{Alpha: float64(sh.P - 1), Beta: frac(sh.P), Delta: ownCopy(sh)}
}

// bruckAllGatherCost: ⌈log2 p⌉ rounds moving the p−1 other blocks in all;
// the own block is copied into Scratch first and the whole result, but for
// the own block in place, rotated into Out last.
func bruckAllGatherCost(sh Shape) Cost {
	return Cost{Alpha: float64(ceilLog2(sh.P)), Beta: frac(sh.P), Delta: 1 + ownCopy(sh)}
}

package algo

import "github.com/hcomm-go/hcomm/internal/sched"

// copyInToOut is the whole program of a single rank for collectives whose
// output is the input: a copy, or nothing in place.
func copyInToOut(p *prog, c int) {
	p.step(sched.CopyOp(p.in(0, c), out(0, c)))
}

// ringAllReduce: in step k of the reduce-scatter rank r sends block r−k to
// r+1 and reduces block r−k−1 arriving from r−1, ending with block r+1 fully
// reduced; the allgather then circulates the reduced blocks. Out of place the
// first reductions read In directly, so Out is written once per block.
func ringAllReduce(p *prog) {
	n, r, c := p.n, p.rank, p.count(p.rank)
	if n == 1 {
		copyInToOut(p, c)
		return
	}
	bl := blocks{c, n}
	blk := func(b int) (off, n int) { b = mod(b, p.n); return bl.off(b), bl.size(b) }
	next, prev := mod(r+1, n), mod(r-1, n)
	for k := range n - 1 {
		so, sl := blk(r - k)
		src := out(so, sl)
		if k == 0 {
			src = p.in(so, sl)
		}
		ro, rl := blk(r - k - 1)
		p.step(sched.SendOp(next, src), sched.RecvReduceOp(prev, p.in(ro, rl), out(ro, rl)))
	}
	for k := range n - 1 {
		so, sl := blk(r + 1 - k)
		ro, rl := blk(r - k)
		p.step(sched.SendOp(next, out(so, sl)), sched.RecvOp(prev, out(ro, rl)))
	}
}

// fold describes the standard reduction of n ranks to a power of two P: of
// the first 2(n−P) ranks, each even one hands its data to the odd one above
// it and sits out; the P remaining ranks are renumbered 0..P−1.
type fold struct {
	n, pow, rem int
}

func newFold(n int) fold {
	pw := floorPow2(n)
	return fold{n: n, pow: pw, rem: n - pw}
}

// idle reports whether rank r sits out (hands its data to r+1).
func (f fold) idle(r int) bool { return r < 2*f.rem && r%2 == 0 }

// folded reports whether rank r receives the data of r−1.
func (f fold) folded(r int) bool { return r < 2*f.rem && r%2 == 1 }

// vrank returns the renumbered rank of an active rank r.
func (f fold) vrank(r int) int {
	if r < 2*f.rem {
		return r / 2
	}
	return r - f.rem
}

// real returns the rank of renumbered rank v.
func (f fold) real(v int) int {
	if v < f.rem {
		return 2*v + 1
	}
	return v + f.rem
}

// rdAllReduce is recursive doubling: in each round partners exchange their
// whole vectors and both reduce. A round cannot reduce into the region it is
// sending, so the running sum alternates between Out and Scratch, arranged
// to end in Out (in place, an odd number of rounds costs one final copy).
func rdAllReduce(p *prog) {
	n, r, c := p.n, p.rank, p.count(p.rank)
	if n == 1 {
		copyInToOut(p, c)
		return
	}
	f := newFold(n)
	whole := func(b sched.Buf) sched.Region { return sched.R(b, 0, c) }
	cur := p.in(0, c)
	if f.idle(r) {
		p.step(sched.SendOp(r+1, cur))
		p.step(sched.RecvOp(r+1, out(0, c)))
		return
	}
	rounds := 0
	for d := 1; d < f.pow; d *= 2 {
		rounds++
	}
	// Destinations of the reductions, the fold first: they alternate and
	// the last is Out. Only exchange rounds must not reduce into the
	// buffer they send from.
	var dst []sched.Buf
	total := rounds
	if f.folded(r) {
		total++
	}
	for i := range total {
		if (total-1-i)%2 == 0 {
			dst = append(dst, sched.Out)
		} else {
			dst = append(dst, sched.Scratch)
		}
	}
	finalCopy := false
	if !f.folded(r) && cur.Buf == sched.Out && dst[0] == sched.Out {
		for i := range dst {
			dst[i] = [2]sched.Buf{sched.Scratch, sched.Out}[i%2]
		}
		finalCopy = dst[len(dst)-1] != sched.Out
	}
	i := 0
	if f.folded(r) {
		p.step(sched.RecvReduceOp(r-1, cur, whole(dst[0])))
		cur = whole(dst[0])
		i++
	}
	v := f.vrank(r)
	for d := 1; d < f.pow; d *= 2 {
		peer := f.real(v ^ d)
		next := whole(dst[i])
		p.step(sched.SendOp(peer, cur), sched.RecvReduceOp(peer, cur, next))
		cur = next
		i++
	}
	if finalCopy {
		p.step(sched.CopyOp(cur, out(0, c)))
	}
	if f.folded(r) {
		p.step(sched.SendOp(r-1, out(0, c)))
	}
}

// hdAllReduce is Rabenseifner's algorithm: after the fold, P ranks halve the
// vector in each round (keeping the half their renumbered rank's bit selects,
// reducing it straight into Out), until rank v holds block v of P fully
// reduced; recursive doubling then gathers the blocks back.
func hdAllReduce(p *prog) {
	n, r, c := p.n, p.rank, p.count(p.rank)
	if n == 1 {
		copyInToOut(p, c)
		return
	}
	f := newFold(n)
	if f.idle(r) {
		p.step(sched.SendOp(r+1, p.in(0, c)))
		p.step(sched.RecvOp(r+1, out(0, c)))
		return
	}
	reduced := false // whether Out holds the running sum of the live part
	src := func(off, n int) sched.Region {
		if reduced {
			return out(off, n)
		}
		return p.in(off, n)
	}
	if f.folded(r) {
		p.step(sched.RecvReduceOp(r-1, p.in(0, c), out(0, c)))
		reduced = true
	}
	bl := blocks{c, f.pow}
	v := f.vrank(r)
	lo, hi := 0, f.pow // the blocks this rank is responsible for
	for d := f.pow / 2; d >= 1; d /= 2 {
		peer := f.real(v ^ d)
		mid := lo + d
		keepLo, keepHi, sendLo, sendHi := lo, mid, mid, hi
		if v&d != 0 {
			keepLo, keepHi, sendLo, sendHi = mid, hi, lo, mid
		}
		so, sn := bl.span(sendLo, sendHi)
		ko, kn := bl.span(keepLo, keepHi)
		p.step(sched.SendOp(peer, src(so, sn)), sched.RecvReduceOp(peer, src(ko, kn), out(ko, kn)))
		reduced = true
		lo, hi = keepLo, keepHi
	}
	for d := 1; d < f.pow; d *= 2 {
		peer := f.real(v ^ d)
		plo, phi := hi, hi+d
		if v&d != 0 {
			plo, phi = lo-d, lo
		}
		mo, mn := bl.span(lo, hi)
		po, pn := bl.span(plo, phi)
		p.step(sched.SendOp(peer, out(mo, mn)), sched.RecvOp(peer, out(po, pn)))
		lo, hi = min(lo, plo), max(hi, phi)
	}
	if f.folded(r) {
		p.step(sched.SendOp(r-1, out(0, c)))
	}
}

// ringAllReduceCost: 2(p−1) steps each moving a block of m/p, half of them
// reducing it.
func ringAllReduceCost(sh Shape) Cost {
	p := float64(sh.P)
	return Cost{Alpha: 2 * (p - 1), Beta: 2 * frac(sh.P), Gamma: frac(sh.P)}
}

// rdAllReduceCost: log2 P exchanges of the whole vector, each reduced; at
// a p that is not a power of two, the fold adds one message and reduction
// of the whole vector before and one message after.
// In place with an odd number of rounds the running sum ends in Scratch and
// is copied back.
func rdAllReduceCost(sh Shape) Cost {
	lf := floorLog2(sh.P)
	l := float64(lf)
	c := Cost{Alpha: l, Beta: l, Gamma: l}
	if sh.P&(sh.P-1) != 0 {
		c = Cost{Alpha: l + 2, Beta: l + 2, Gamma: l + 1}
	}
	if sh.InPlace && lf%2 == 1 {
		c.Delta = 1
	}
	return c
}

// hdAllReduceCost: log2 P halving rounds moving and reducing (P−1)/P·m in
// all, log2 P doubling rounds moving as much again, plus rd's fold.
func hdAllReduceCost(sh Shape) Cost {
	lf := floorLog2(sh.P)
	l, f := float64(lf), frac(1<<lf)
	if sh.P&(sh.P-1) == 0 {
		return Cost{Alpha: 2 * l, Beta: 2 * f, Gamma: f}
	}
	return Cost{Alpha: 2*l + 2, Beta: 2*f + 2, Gamma: f + 1}
}

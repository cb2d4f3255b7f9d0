package algo

import (
	"math/bits"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// a2a is one rank's view of an AllToAll: its row and column of the matrix.
type a2a struct {
	send, recv   []int // elements to and from each peer
	sdisp, rdisp []int // where each peer's block starts in In and in Out
}

func newA2A(p *prog) a2a {
	n, r := p.n, p.rank
	a := a2a{send: make([]int, n), recv: make([]int, n), sdisp: make([]int, n+1), rdisp: make([]int, n+1)}
	for k := range n {
		a.send[k], a.recv[k] = p.s.Matrix[r][k], p.s.Matrix[k][r]
		a.sdisp[k+1] = a.sdisp[k] + a.send[k]
		a.rdisp[k+1] = a.rdisp[k] + a.recv[k]
	}
	return a
}

func (a a2a) sendBlock(p *prog, k int) sched.Region { return p.in(a.sdisp[k], a.send[k]) }
func (a a2a) recvBlock(k int) sched.Region          { return out(a.rdisp[k], a.recv[k]) }

// pairwiseAllToAll: out of place, in step k rank r sends to r+k and receives
// from r−k. In place a block cannot be received where it has not yet been
// sent, so ranks instead exchange in pairs, one pair per round, into
// alternating Scratch slots, each copied into Out during the next round.
// The rounds are those of exchangePartner: p−1 at an even p, p at an odd one.
func pairwiseAllToAll(p *prog) {
	n, r := p.n, p.rank
	a := newA2A(p)
	if !p.alias.Aliased {
		own := sched.CopyOp(a.sendBlock(p, r), a.recvBlock(r))
		if n == 1 {
			p.step(own)
		}
		for k := 1; k < n; k++ {
			to, from := mod(r+k, n), mod(r-k, n)
			ops := []sched.Op{sched.SendOp(to, a.sendBlock(p, to)), sched.RecvOp(from, a.recvBlock(from))}
			if k == 1 {
				ops = append(ops, own)
			}
			p.step(ops...)
		}
		return
	}
	slot := 0
	for k := range n {
		if k != r {
			slot = max(slot, a.recv[k])
		}
	}
	var pending sched.Op // the copy out of the slot filled last round
	i := 0
	for k := range exchangeRounds(n) {
		peer := exchangePartner(n, k, r)
		if peer == r {
			continue
		}
		tmp := scr((i%2)*slot, a.recv[peer])
		ops := []sched.Op{sched.SendOp(peer, a.recvBlock(peer)), sched.RecvOp(peer, tmp)}
		if pending.Kind != 0 {
			ops = append(ops, pending)
		}
		p.step(ops...)
		pending = sched.CopyOp(tmp, a.recvBlock(peer))
		i++
	}
	if pending.Kind != 0 {
		p.step(pending)
	}
}

// exchangeRounds returns the number of rounds in which every pair of n ranks
// meets once, each rank in at most one pair per round: n−1 for an even n,
// n for an odd one.
func exchangeRounds(n int) int {
	if n%2 == 0 {
		return n - 1
	}
	return n
}

// exchangePartner returns rank r's partner in round k of exchangeRounds(n),
// r itself when r sits the round out. For a power of two it is r XOR (k+1);
// for another even n, the circle method: rank n−1 meets k, and any other
// rank r ≠ k meets (2k − r) mod (n−1); for an odd n, r meets (k − r) mod n,
// which is r for one rank per round.
func exchangePartner(n, k, r int) int {
	switch {
	case n%2 == 1:
		return mod(k-r, n)
	case n&(n-1) == 0:
		return r ^ (k + 1)
	case r == n-1:
		return k
	case r == k:
		return n - 1
	}
	return mod(2*k-r, n-1)
}

// linearAllToAll posts every send and receive in one step, in rank-relative
// order (to r+1, r+2, …; from r−1, r−2, …) so that ranks that serve their
// messages in order do not all send to the same rank at once. In place the
// blocks arrive in Scratch (in Out's order, without the own block) and are
// copied into Out in a second step.
func linearAllToAll(p *prog) {
	n, r := p.n, p.rank
	a := newA2A(p)
	if !p.alias.Aliased {
		ops := []sched.Op{sched.CopyOp(a.sendBlock(p, r), a.recvBlock(r))}
		for k := 1; k < n; k++ {
			to, from := mod(r+k, n), mod(r-k, n)
			ops = append(ops, sched.SendOp(to, a.sendBlock(p, to)), sched.RecvOp(from, a.recvBlock(from)))
		}
		p.step(ops...)
		return
	}
	ownLo, ownHi := a.rdisp[r], a.rdisp[r+1]
	total := a.rdisp[n]
	// at returns where the block from rank k lands in Scratch.
	at := func(k int) int {
		if k > r {
			return a.rdisp[k] - (ownHi - ownLo)
		}
		return a.rdisp[k]
	}
	var ops []sched.Op
	for k := 1; k < n; k++ {
		to, from := mod(r+k, n), mod(r-k, n)
		ops = append(ops, sched.SendOp(to, a.recvBlock(to)), sched.RecvOp(from, scr(at(from), a.recv[from])))
	}
	p.step(ops...)
	p.step(
		sched.CopyOp(scr(0, ownLo), out(0, ownLo)),
		sched.CopyOp(scr(ownLo, total-ownHi), out(ownHi, total-ownHi)),
	)
}

// uniformMatrix reports whether every entry of s.Matrix is the same count,
// above zero.
func uniformMatrix(s sched.Spec) bool {
	if len(s.Matrix) != s.N || s.N < 1 || len(s.Matrix[0]) < 1 {
		return false
	}
	c := s.Matrix[0][0]
	for _, row := range s.Matrix {
		if len(row) != s.N {
			return false
		}
		for _, v := range row {
			if v != c {
				return false
			}
		}
	}
	return c > 0
}

// uniformRowColumn reports whether rank's row and column of s.Matrix are
// one count, above zero: what a rank can check of uniformMatrix.
func uniformRowColumn(s sched.Spec, rank int) bool {
	c := s.Matrix[rank][rank]
	for k := range s.N {
		if s.Matrix[rank][k] != c || s.Matrix[k][rank] != c {
			return false
		}
	}
	return c > 0
}

// bruckAllToAll is Bruck's algorithm for a uniform AllToAll of c elements
// per block. Position j of a rank holds, at the start, the block it sends to
// r+j and, at the end, the block it receives from r−j; in the round at
// distance 2^k each rank sends the positions with bit k set to r+2^k and
// receives the same positions from r−2^k. The positions of a round are
// packed into Scratch, sent in one message and unpacked into their final
// place in Out, unless the next round sends them on: it packs them straight
// from the receiving pack, in the step that unpacks the others. Out of place, a position's block stays in In until
// it is first sent; in place the row is first copied aside, since blocks
// arrive over blocks not yet sent.
func bruckAllToAll(p *prog) {
	n, r := p.n, p.rank
	a := newA2A(p)
	c := a.send[r]
	if n == 1 {
		p.step(sched.CopyOp(a.sendBlock(p, r), a.recvBlock(r)))
		return
	}
	maxSel := 0
	for bit := 1; bit < n; bit <<= 1 {
		m := 0
		for j := 1; j < n; j++ {
			if j&bit != 0 {
				m++
			}
		}
		maxSel = max(maxSel, m)
	}
	// Scratch: the staged row (in place), the sending pack, the receiving pack.
	staged := 0
	if p.alias.Aliased {
		staged = (n - 1) * c
	}
	sendAt, recvAt := staged, staged+maxSel*c
	loc := make([]sched.Region, n) // where position j's block is now
	var ops []sched.Op
	for j := 1; j < n; j++ {
		loc[j] = a.sendBlock(p, mod(r+j, n))
	}
	if p.alias.Aliased {
		// Out blocks r+1, …, n−1, 0, …, r−1 to Scratch in position order.
		hi := (n - 1 - r) * c
		ops = append(ops, sched.CopyOp(out((r+1)*c, hi), scr(0, hi)), sched.CopyOp(out(0, r*c), scr(hi, r*c)))
	} else {
		ops = append(ops, sched.CopyOp(a.sendBlock(p, r), a.recvBlock(r)))
	}
	var landed []int // positions received last round, still in the receiving pack
	for bit := 1; bit < n; bit <<= 1 {
		var sel []int
		for j := 1; j < n; j++ {
			if j&bit != 0 {
				sel = append(sel, j)
			}
		}
		for i, j := range sel {
			ops = append(ops, sched.CopyOp(loc[j], scr(sendAt+i*c, c)))
		}
		p.step(ops...)
		ops = nil
		if bit == 1 && p.alias.Aliased {
			for j := 1; j < n; j++ {
				loc[j] = scr((j-1)*c, c)
			}
		}
		for _, j := range landed {
			loc[j] = a.recvBlock(mod(r-j, n))
		}
		m := len(sel) * c
		p.step(sched.SendOp(mod(r+bit, n), scr(sendAt, m)), sched.RecvOp(mod(r-bit, n), scr(recvAt, m)))
		landed = landed[:0]
		for i, j := range sel {
			loc[j] = scr(recvAt+i*c, c)
			if j&(bit<<1) == 0 { // else the next round sends it on from the pack
				landed = append(landed, j)
				ops = append(ops, sched.CopyOp(loc[j], a.recvBlock(mod(r-j, n))))
			}
		}
	}
	p.step(ops...)
}

// bruckAllToAllCost: ⌈log2 p⌉ rounds moving, in all, as many blocks as the
// bits set in 1, …, p−1. A block is packed before every message it travels
// in and unpacked after the last of each run of consecutive rounds; out of
// place the own block is copied, in place the row is first copied aside.
func bruckAllToAllCost(sh Shape) Cost {
	moved, copied := 0, 1
	if sh.InPlace {
		copied = sh.P - 1
	}
	for j := 1; j < sh.P; j++ {
		moved += bits.OnesCount(uint(j))
		copied += bits.OnesCount(uint(j)) + bits.OnesCount(uint(j&^(j>>1)))
	}
	pf := float64(sh.P)
	return Cost{Alpha: float64(ceilLog2(sh.P)), Beta: float64(moved) / pf, Delta: float64(copied) / pf}
}

// pairwiseAllToAllCost: p−1 steps moving one block each, and out of place
// the copy of the own block. In place every block received is copied out of
// Scratch, and at an odd p there are p rounds, every rank sitting one out,
// chained so that the critical path has p blocks.
func pairwiseAllToAllCost(sh Shape) Cost {
	switch {
	case !sh.InPlace:
		return Cost{Alpha: float64(sh.P - 1), Beta: frac(sh.P), Delta: ownCopy(sh)}
	case sh.P%2 == 1:
		return Cost{Alpha: float64(sh.P), Beta: 1, Delta: 1}
	}
	return Cost{Alpha: float64(sh.P - 1), Beta: frac(sh.P), Delta: frac(sh.P)}
}

// linearAllToAllCost: the p−1 blocks a rank sends leave one after the
// other, in rank-relative order, so that every rank receives one block at a
// time. Out of place the own block is copied; in place all the others are,
// out of Scratch.
func linearAllToAllCost(sh Shape) Cost {
	c := Cost{Alpha: float64(sh.P - 1), Beta: frac(sh.P), Delta: ownCopy(sh)}
	if sh.InPlace {
		c.Delta = frac(sh.P)
	}
	return c
}

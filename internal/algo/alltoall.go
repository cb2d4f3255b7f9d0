package algo

import "github.com/hcomm-go/hcomm/internal/sched"

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
// sent, so ranks instead exchange in symmetric pairs (r with k−r mod n in
// round k) into alternating Scratch slots, each copied into Out during the
// next round.
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
	for k := range n {
		peer := mod(k-r, n)
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

// linearAllToAll posts every send and receive in one step. In place the
// blocks arrive in Scratch (in Out's order, without the own block) and are
// copied into Out in a second step.
func linearAllToAll(p *prog) {
	n, r := p.n, p.rank
	a := newA2A(p)
	if !p.alias.Aliased {
		ops := []sched.Op{sched.CopyOp(a.sendBlock(p, r), a.recvBlock(r))}
		for k := range n {
			if k != r {
				ops = append(ops, sched.SendOp(k, a.sendBlock(p, k)), sched.RecvOp(k, a.recvBlock(k)))
			}
		}
		p.step(ops...)
		return
	}
	ownLo, ownHi := a.rdisp[r], a.rdisp[r+1]
	total := a.rdisp[n]
	var ops []sched.Op
	for k := range n {
		if k == r {
			continue
		}
		at := a.rdisp[k]
		if k > r {
			at -= ownHi - ownLo
		}
		ops = append(ops, sched.SendOp(k, a.recvBlock(k)), sched.RecvOp(k, scr(at, a.recv[k])))
	}
	p.step(ops...)
	p.step(
		sched.CopyOp(scr(0, ownLo), out(0, ownLo)),
		sched.CopyOp(scr(ownLo, total-ownHi), out(ownHi, total-ownHi)),
	)
}

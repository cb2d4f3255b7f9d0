package sched

import "fmt"

// PairExchange reports whether steps si and si+1 of p form a pairwise
// reduce-and-exchange with one peer, which an executor may run as one
// fused op (transport.Exchanger): step si is exactly {Send(peer, A),
// RecvReduce(peer, B, D)} and step si+1 exactly {Send(peer, D), Recv(peer,
// C)}, with B and D at the same place (B is D, or In at D's offset), and C
// at A's offset and length (A is C, or A in In). The two-rank ring and
// halving-doubling AllReduce are made of it.
//
// Fused, the two messages each way are cut into pieces and interleaved
// (first message's piece j, reduced piece j, piece j+1...) and the result
// D is sent from where it is computed, not read again. The order of
// messages on the channel is then not the program's, so both ends must
// fuse: Verify checks that wherever one rank's steps form a PairExchange,
// the peer's steps at the matching messages do too (CheckFusion).
func PairExchange(p *Program, si int) (peer int, ok bool) {
	if si < 0 || si+1 >= len(p.Steps) {
		return 0, false
	}
	s1, s2 := p.Steps[si].Ops, p.Steps[si+1].Ops
	if len(s1) != 2 || len(s2) != 2 {
		return 0, false
	}
	snd, rr := s1[0], s1[1]
	if snd.Kind != Send {
		snd, rr = rr, snd
	}
	snd2, rcv := s2[0], s2[1]
	if snd2.Kind != Send {
		snd2, rcv = rcv, snd2
	}
	if snd.Kind != Send || rr.Kind != RecvReduce || snd2.Kind != Send || rcv.Kind != Recv {
		return 0, false
	}
	q := snd.Peer
	if rr.Peer != q || snd2.Peer != q || rcv.Peer != q {
		return 0, false
	}
	a, b, d, c := snd.Src, rr.Src, rr.Dst, rcv.Dst
	same := func(x, y Region) bool {
		return x.Off == y.Off && x.Len == y.Len && (x.Buf == y.Buf || x.Buf == In && y.Buf == Out)
	}
	if snd2.Src != d || !same(b, d) || !same(a, c) {
		return 0, false
	}
	return q, true
}

// checkFusions checks that the PairExchanges of every rank pair up: where
// rank r's steps si, si+1 form one with q, q's program has one with r
// whose first receive matches r's first send and whose first send
// matches r's first receive.
func checkFusions(progs []*Program) *Error {
	for r, p := range progs {
		for si := 0; si+1 < len(p.Steps); si++ {
			q, ok := PairExchange(p, si)
			if !ok {
				continue
			}
			sent, got := countMsgs(p, si, q, true), countMsgs(p, si, q, false)
			found := false
			pq := progs[q]
			for sj := 0; sj+1 < len(pq.Steps) && !found; sj++ {
				if x, ok := PairExchange(pq, sj); ok && x == r &&
					countMsgs(pq, sj, r, true) == got && countMsgs(pq, sj, r, false) == sent {
					found = true
				}
			}
			if !found {
				return &Error{Check: CheckFusion, Rank: r, Step: si, Op: -1,
					Msg: fmt.Sprintf("steps %d and %d form a fused exchange with rank %d, whose matching steps do not", si, si+1, q)}
			}
			si++
		}
	}
	return nil
}

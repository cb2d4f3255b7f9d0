package algo

import (
	"slices"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// The leader and multi-rail forms of the layout algorithms:
//
//	coll           algo    steps                                  inter-host (busiest NIC)
//	AllReduce      leader  2⌈log2 L⌉ + ⌊log2 H⌋ (+2)              ⌊log2 H⌋ (+2) messages of m
//	Reduce         hier    ⌈log2 L⌉ + ⌈log2 H⌉                     ⌈log2 H⌉ messages of m
//	AllGather      hier    ⌈R/L⌉(H−1) + (L−1)·H⌈R/L⌉               (H−1)/H·T
//	ReduceScatter  hier    (L−1)·H⌈R/L⌉ + ⌈R/L⌉(H−1)               (H−1)/H·T
//	AllGather      leader  1 + (H−1) + ⌈log2 L⌉                     H−1 messages of L·T/n
//	ReduceScatter  leader  ⌈log2 L⌉ + (H−1) + 1                     H−1 messages of L·T/n
//
// (m a rank's vector, T the total of the blocks, R the most ranks on a
// host.) The leader forms are for small messages: few steps, every step
// a whole vector. The multi-rail AllGather and ReduceScatter move each
// block between hosts once per receiving host, every local rank carrying
// its own rail, like the multi-rail AllReduce.

// reduceIn runs a binomial-tree reduction among group toward group[root]:
// the data start in cur, partial results accumulate in acc. It returns
// where this member's result lies and whether the member sent it on (every
// member but the root does).
func reduceIn(p *prog, group []int, root int, cur, acc sched.Region) (sched.Region, bool) {
	g := len(group)
	v := mod(slices.Index(group, p.rank)-root, g)
	at := func(u int) int { return group[mod(u+root, g)] }
	for mask := 1; mask < g; mask <<= 1 {
		if v&mask != 0 {
			p.step(sched.SendOp(at(v-mask), cur))
			return cur, true
		}
		if v+mask < g {
			p.step(sched.RecvReduceOp(at(v+mask), cur, acc))
			cur = acc
		}
	}
	return cur, false
}

// leaderAllReduce is the small-message hierarchical allreduce: a binomial
// reduction inside each host to its first rank, recursive doubling among
// those leaders, and a binomial broadcast inside each host.
func leaderAllReduce(p *prog, l Layout) {
	c := p.count(p.rank)
	if p.n == 1 {
		copyInToOut(p, c)
		return
	}
	host, _ := l.where(p.rank)
	mine := l.Hosts[host]
	leaders := make([]int, len(l.Hosts))
	for h, rs := range l.Hosts {
		leaders[h] = rs[0]
	}
	acc := out(0, c)
	cur, sent := reduceIn(p, mine, 0, p.in(0, c), acc)
	if !sent {
		cur = rdIn(p, leaders, cur)
		if cur != acc {
			p.step(sched.CopyOp(cur, acc))
		}
	}
	if len(mine) > 1 {
		binomialIn(p, mine, 0, acc)
	}
}

// rdIn runs a recursive-doubling allreduce of the vector in cur among
// group (of any size: the members past the largest power of two P fold
// into a partner first and get the result back at the end) and returns
// where the result lies. The running sum alternates between Out and
// Scratch, since a round cannot reduce into the region it sends.
func rdIn(p *prog, group []int, cur sched.Region) sched.Region {
	return rdInFrom(p, group, cur, false)
}

// rdInFrom is rdIn; toScratch starts the alternation from an input in
// In with Scratch instead of Out, so that a caller that knows the number
// of rounds to come (rdRounds) can have the last one land in Out.
func rdInFrom(p *prog, group []int, cur sched.Region, toScratch bool) sched.Region {
	g := len(group)
	if g == 1 {
		return cur
	}
	v := slices.Index(group, p.rank)
	P := 1
	for P*2 <= g {
		P *= 2
	}
	other := func(r sched.Region) sched.Region {
		if r.Buf == sched.Out || (r.Buf == sched.In && toScratch) {
			return scr(0, r.Len)
		}
		return out(0, r.Len)
	}
	if v >= P {
		p.step(sched.SendOp(group[v-P], cur))
		res := out(0, cur.Len)
		p.step(sched.RecvOp(group[v-P], res))
		return res
	}
	if v+P < g {
		next := other(cur)
		p.step(sched.RecvReduceOp(group[v+P], cur, next))
		cur = next
	}
	for d := 1; d < P; d *= 2 {
		next := other(cur)
		peer := group[v^d]
		p.step(sched.SendOp(peer, cur), sched.RecvReduceOp(peer, cur, next))
		cur = next
	}
	if v+P < g {
		p.step(sched.SendOp(group[v+P], cur))
	}
	return cur
}

// rdRounds returns how many times rdIn moves p.rank's running sum from
// one region to the other among group, or extra when the rank is one of
// those folded in (it receives the result into Out).
func rdRounds(group []int, rank int) (rounds int, extra bool) {
	g := len(group)
	if g == 1 {
		return 0, false
	}
	v := slices.Index(group, rank)
	P := 1
	for P*2 <= g {
		P *= 2
	}
	if v >= P {
		return 0, true
	}
	if v+P < g {
		rounds++
	}
	return rounds + floorLog2(P), false
}

// hierReduce reduces inside each host to its leader (the root on the
// root's host, else the host's first rank), then among the leaders to the
// root. Partial results live in Scratch except on the root.
func hierReduce(p *prog, l Layout) {
	c := p.count(p.rank)
	if p.n == 1 {
		copyInToOut(p, c)
		return
	}
	root := p.s.Root
	rh, _ := l.where(root)
	host, _ := l.where(p.rank)
	leaders := make([]int, len(l.Hosts))
	for h, rs := range l.Hosts {
		leaders[h] = rs[0]
	}
	leaders[rh] = root
	mine := l.Hosts[host]
	acc := scr(0, c)
	if p.rank == root {
		acc = out(0, c)
	}
	cur, sent := reduceIn(p, mine, slices.Index(mine, leaders[host]), p.in(0, c), acc)
	if sent || len(leaders) == 1 {
		return
	}
	reduceIn(p, leaders, rh, cur, acc)
}

// railMember returns the rank of host h that carries rail j between
// hosts in the multi-rail AllGather and ReduceScatter: local rank j, or
// on a host with fewer ranks, local rank j mod L (a proxy with no block
// of its own on that rail).
func (l Layout) railMember(h, j int) int {
	rs := l.Hosts[h]
	return rs[j%len(rs)]
}

// railBlock returns the rank whose block rail j carries from host h, or
// -1 when host h has no local rank j.
func (l Layout) railBlock(h, j int) int {
	if rs := l.Hosts[h]; j < len(rs) {
		return rs[j]
	}
	return -1
}

// composite returns the ranks whose blocks local rank i of host h holds
// between the inter-host and the intra-host phase: those of every rail it
// carries, rail by rail, host by host.
func (l Layout) composite(h, i int) []int {
	L := len(l.Hosts[h])
	var out []int
	for j := i; j < l.rails(); j += L {
		for hh := range l.Hosts {
			if q := l.railBlock(hh, j); q >= 0 {
				out = append(out, q)
			}
		}
	}
	return out
}

// railsOfMember returns the rails local rank i of an L-rank host carries.
func (l Layout) railsOfMember(L, i int) []int {
	var js []int
	for j := i; j < l.rails(); j += L {
		js = append(js, j)
	}
	return js
}

// compositeRing passes composites around the ring of a host's ranks for
// L−1 rounds: in round k, member i sends composite i−k−shift and receives
// composite i−k−1−shift, one block per step (shift 0 for an allgather,
// which sends its own first; 1 for a reduce-scatter, which receives its
// own last). send and recv give the ops for one block.
func compositeRing(p *prog, l Layout, host, shift int, send func(to, q, k int) sched.Op, recv func(from, q, k int) sched.Op) {
	mine := l.Hosts[host]
	L := len(mine)
	i := slices.Index(mine, p.rank)
	comp := make([][]int, L)
	for m := range L {
		comp[m] = l.composite(host, m)
	}
	next, prev := mine[mod(i+1, L)], mine[mod(i-1, L)]
	for k := range L - 1 {
		sc, rc := comp[mod(i-k-shift, L)], comp[mod(i-k-1-shift, L)]
		for t := range max(len(sc), len(rc)) {
			var ops []sched.Op
			if t < len(sc) {
				ops = append(ops, send(next, sc[t], k))
			}
			if t < len(rc) {
				ops = append(ops, recv(prev, rc[t], k))
			}
			p.step(ops...)
		}
	}
}

// hierAllGather is the multi-rail allgather. (1) For each rail j it
// carries, a rank runs a ring allgather among the rail's members, one per
// host, each contributing its host's block of the rail (a proxy on a host
// without local rank j contributes nothing). (2) The ranks of each host
// pass what they gathered around the host's ring.
func hierAllGather(p *prog, l Layout) {
	d := p.displs()
	blk := func(q int) sched.Region {
		if q < 0 {
			return out(0, 0)
		}
		return out(d[q], d[q+1]-d[q])
	}
	p.step(sched.CopyOp(p.in(0, p.count(p.rank)), blk(p.rank)))
	if p.n == 1 {
		return
	}
	host, local := l.where(p.rank)
	H := len(l.Hosts)
	if H > 1 {
		for _, j := range l.railsOfMember(len(l.Hosts[host]), local) {
			group := make([]int, H)
			for h := range H {
				group[h] = l.railMember(h, j)
			}
			ringAG(p, group, func(b int) (int, int) {
				r := blk(l.railBlock(b, j))
				return r.Off, r.Len
			})
		}
	}
	if len(l.Hosts[host]) > 1 {
		compositeRing(p, l, host, 0,
			func(to, q, _ int) sched.Op { return sched.SendOp(to, blk(q)) },
			func(from, q, _ int) sched.Op { return sched.RecvOp(from, blk(q)) })
	}
}

// hierReduceScatter is the multi-rail reduce-scatter, hierAllGather run
// backwards. (1) The ranks of each host reduce-scatter around the host's
// ring so that each holds, reduced over its host, the blocks of the rails
// it carries (partial sums in Scratch[0, T), results in Scratch[T, 2T)).
// (2) For each rail, a ring reduce-scatter among its members, one per
// host, leaves each block reduced over every host with its rank.
func hierReduceScatter(p *prog, l Layout) {
	hierReduceScatterPart(p, l, func(q int) (int, int) { return 0, p.count(q) })
}

// hierReduceScatterPart runs hierReduceScatter on a part of every block:
// part(q) gives the offset inside block q and the length of its part.
// It returns the number of steps of phase 1 (with p.keep, every one of
// its steps, empty or not).
func hierReduceScatterPart(p *prog, l Layout, sub func(q int) (off, n int)) (phase1 int) {
	d := p.displs()
	T := d[p.n]
	mo, c := sub(p.rank)
	if p.n == 1 {
		p.step(sched.CopyOp(p.in(mo, c), out(mo, c)))
		return 0
	}
	host, local := l.where(p.rank)
	H := len(l.Hosts)
	L := len(l.Hosts[host])
	at := func(q int) int { o, _ := sub(q); return d[q] + o }
	size := func(q int) int { _, n := sub(q); return n }
	in := func(q int) sched.Region { return p.in(at(q), size(q)) }
	part := func(q int) sched.Region { return scr(at(q), size(q)) }
	// held is where the host-reduced block q lies after phase 1.
	held := func(q int) sched.Region {
		switch {
		case q == p.rank && H == 1:
			return out(mo, c)
		case L == 1:
			return in(q)
		}
		return scr(T+at(q), size(q))
	}
	if L > 1 {
		// Block q reaches its holder after L−1 hops: the last hop
		// (round L−2) reduces into held, earlier ones into part.
		compositeRing(p, l, host, 1,
			func(to, q, k int) sched.Op {
				if k == 0 {
					return sched.SendOp(to, in(q))
				}
				return sched.SendOp(to, part(q))
			},
			func(from, q, k int) sched.Op {
				if k == L-2 {
					return sched.RecvReduceOp(from, in(q), held(q))
				}
				return sched.RecvReduceOp(from, in(q), part(q))
			})
	}
	phase1 = len(p.steps)
	if H == 1 {
		return phase1
	}
	for _, j := range l.railsOfMember(L, local) {
		group := make([]int, H)
		for h := range H {
			group[h] = l.railMember(h, j)
		}
		i := slices.Index(group, p.rank)
		q := func(b int) int { return l.railBlock(mod(b, H), j) }
		reg := func(b int, f func(int) sched.Region) sched.Region {
			if qq := q(b); qq >= 0 {
				return f(qq)
			}
			return out(0, 0)
		}
		// Partial sums of phase 2 reuse Scratch[0, T): phase 1's are
		// spent.
		fin := func(b int) sched.Region {
			if q(b) == p.rank {
				return out(mo, c)
			}
			return out(0, 0) // a proxy keeps nothing
		}
		next, prev := group[mod(i+1, H)], group[mod(i-1, H)]
		for k := range H - 1 {
			sb, rb := i-k-1, i-k-2
			src := reg(sb, held)
			if k > 0 {
				src = reg(sb, part)
			}
			dst := reg(rb, part)
			if k == H-2 {
				dst = fin(rb)
			}
			p.step(sched.SendOp(next, src), sched.RecvReduceOp(prev, reg(rb, held), dst))
		}
	}
	return phase1
}

// pipeDepth returns the most steps either phase of hierReduceScatterPart
// takes on any rank of l, empty steps counted: phase 1 a step per block of
// the larger composite of each of L−1 rounds, phase 2 H−1 steps per rail
// the rank carries.
func (l Layout) pipeDepth() int {
	H := len(l.Hosts)
	D := 1
	for h, rs := range l.Hosts {
		L := len(rs)
		comp := make([][]int, L)
		for m := range L {
			comp[m] = l.composite(h, m)
		}
		for i := range L {
			p1 := 0
			for k := range L - 1 {
				p1 += max(len(comp[mod(i-k-1, L)]), len(comp[mod(i-k-2, L)]))
			}
			D = max(D, p1, len(l.railsOfMember(L, i))*(H-1))
		}
	}
	return D
}

// pipeChunks is the number of parts pipeReduceScatter cuts every block
// into.
const pipeChunks = 4

// pipeReduceScatter (priced by pipeReduceScatterCost) is
// hierReduceScatter pipelined: every block is cut
// into pipeChunks parts (sched.Block), hierReduceScatterPart is built for
// each part, and the parts' programs are laid over each other D steps
// apart (D the longer of the two phases), so that phase 1 of part k+1
// (inside the host) runs in the same steps as phase 2 of part k (between
// hosts): the intra-host reduction hides behind the link, where hier runs
// it all before the first byte leaves the host. D is the same on every
// rank (the longest phase of any rank), so with one phase never longer
// than D, every rank sends and receives a pair's messages part by part in
// the same order; in a step at most one part is in each phase, and phase
// 1 talks only to ranks of the host and phase 2 only to other hosts, so
// no step has two messages with one peer in one direction. Parts use
// disjoint ranges of In, Out and Scratch. On hosts of unequal sizes the
// ranks' phases differ in length and laying them over each other can
// close a cycle of waits: there (and on one host) it is hier.
func pipeReduceScatter(p *prog, l Layout) {
	if _, H, Lmax, Lmin := l.shape(); H == 1 || Lmax != Lmin {
		hierReduceScatter(p, l)
		return
	}
	var parts [pipeChunks][]sched.Step
	D := l.pipeDepth()
	for k := range pipeChunks {
		pk := newProg(p.s, p.rank)
		pk.keep = true
		hierReduceScatterPart(pk, l, func(q int) (int, int) {
			return sched.Block(p.count(q), pipeChunks, k)
		})
		parts[k] = pk.steps
	}
	for t := 0; ; t++ {
		var ops []sched.Op
		more := false
		for k := range pipeChunks {
			if i := t - k*D; i >= 0 && i < len(parts[k]) {
				ops = append(ops, parts[k][i].Ops...)
			}
			if t-k*D < len(parts[k]) {
				more = true
			}
		}
		if !more {
			return
		}
		p.step(ops...)
	}
}

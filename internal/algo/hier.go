package algo

import (
	"fmt"
	"slices"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// Layout is how a job's ranks sit on hosts: Hosts[h] lists host h's ranks
// in the order the topology prefers (NUMA node, then rank), hosts in the
// order a ring should visit them. Every rank appears exactly once.
type Layout struct {
	Hosts [][]int
}

// FlatLayout is the layout of n ranks on one host in rank order: the
// topology-aware algorithms reduce to their flat counterparts on it.
func FlatLayout(n int) Layout {
	l := Layout{Hosts: [][]int{make([]int, n)}}
	for i := range n {
		l.Hosts[0][i] = i
	}
	return l
}

// Check reports whether the layout places ranks 0..n−1 each exactly once
// on non-empty hosts.
func (l Layout) Check(n int) error {
	seen := make([]bool, n)
	total := 0
	for h, rs := range l.Hosts {
		if len(rs) == 0 {
			return fmt.Errorf("algo: host %d of the layout has no ranks", h)
		}
		for _, r := range rs {
			if r < 0 || r >= n {
				return fmt.Errorf("algo: layout places rank %d of %d", r, n)
			}
			if seen[r] {
				return fmt.Errorf("algo: layout places rank %d twice", r)
			}
			seen[r] = true
			total++
		}
	}
	if total != n {
		return fmt.Errorf("algo: layout places %d of %d ranks", total, n)
	}
	return nil
}

// Order returns the ring order: the hosts' ranks concatenated. A ring in
// this order crosses each host boundary once.
func (l Layout) Order() []int {
	var o []int
	for _, rs := range l.Hosts {
		o = append(o, rs...)
	}
	return o
}

// where returns rank's host and its index among the host's ranks.
func (l Layout) where(rank int) (host, local int) {
	for h, rs := range l.Hosts {
		if i := slices.Index(rs, rank); i >= 0 {
			return h, i
		}
	}
	return -1, -1
}

// Topology-aware algorithms. They are built for one layout, so they are not
// in the static registry: ForLayout returns them.
//
//	coll           algo    steps                      sent (inter-host, busiest rank)     sent (intra-host)
//	AllReduce      hring   2(n−1)                     2(n−1)/n·m on H edges of the ring    the rest
//	AllReduce      hier    2(L−1) + 2(H−1)            2(H−1)/H·m/L                         2(L−1)/L·m
//	AllGather      hring   n−1                        T − own on H edges                   the rest
//	ReduceScatter  hring   n−1                        T − own on H edges                   the rest
//	Broadcast      hier    ⌈log2 H⌉ + ⌈log2 L⌉        m per child (binomial among hosts)   m per child
//	(AllReduce leader, Reduce hier, and the multi-rail AllGather and
//	ReduceScatter hier: see hierlead.go)
//	Barrier        hier    2 + ⌈log2 H⌉               ⌈log2 H⌉ empty messages              1 empty message
//
// (H hosts, L ranks per host — the most on any host for uneven layouts;
// "hring" is the flat ring in the layout's order, so a ring of n ranks on H
// hosts uses H inter-host edges instead of up to n.)

// ForLayout returns the topology-aware algorithms for layout l: for each
// collective they implement, an Algorithm whose Build refuses specs of
// another size than the layout's.
func ForLayout(l Layout) []Algorithm {
	return []Algorithm{
		defLayout(l, sched.AllReduce, "hring", func(p *prog, l Layout) {
			if p.n == 1 {
				copyInToOut(p, p.count(p.rank))
				return
			}
			c := p.count(p.rank)
			bl := blocks{c, p.n}
			ringAR(p, l.Order(), func(i int) (int, int) { return bl.off(i), bl.size(i) }, true)
		}, hringAllReduceCost),
		defLayout(l, sched.AllReduce, "hier", hierAllReduce, hierAllReduceCost),
		defLayout(l, sched.AllReduce, "leader", leaderAllReduce, leaderAllReduceCost),
		defLayout(l, sched.AllGather, "hring", orderedAllGather, hringAllGatherCost),
		defLayout(l, sched.AllGather, "hier", hierAllGather, hierAllGatherCost),
		defLayout(l, sched.AllGather, "leader", leaderAllGather, leaderAllGatherCost),
		defLayout(l, sched.ReduceScatter, "hring", orderedReduceScatter, hringReduceScatterCost),
		defLayout(l, sched.ReduceScatter, "hier", hierReduceScatter, hierReduceScatterCost),
		defLayout(l, sched.ReduceScatter, "leader", leaderReduceScatter, leaderReduceScatterCost),
		defLayout(l, sched.ReduceScatter, "pipe", pipeReduceScatter, pipeReduceScatterCost),
		defLayout(l, sched.AllToAll, "leader", leaderAllToAll, leaderAllToAllCost),
		defLayout(l, sched.Broadcast, "hier", hierBroadcast, hierBroadcastCost),
		defLayout(l, sched.Reduce, "hier", hierReduce, hierReduceCost),
		defLayout(l, sched.Barrier, "hier", hierBarrier, hierBarrierCost),
		defLayout(l, sched.AllReduce, "rail", railAllReduce, railAllReduceCost),
		defLayout(l, sched.Barrier, "rail", railBarrier, railBarrierCost),
	}
}

func defLayout(l Layout, c sched.Coll, name string, build func(*prog, Layout), cost func(Layout, float64, LinkCosts) float64) Algorithm {
	n := 0
	for _, rs := range l.Hosts {
		n += len(rs)
	}
	return Algorithm{
		Name: name,
		Coll: c,
		Supports: func(s sched.Spec) bool {
			return s.Coll == c && s.N == n && n >= 1 && (c != sched.AllToAll || uniformMatrix(s))
		},
		Build: func(s sched.Spec, rank int) (*sched.Program, error) {
			if s.Coll != c {
				return nil, fmt.Errorf("algo: %s %s cannot build %s", c, name, s.Coll)
			}
			if err := checkSpec(s, rank); err != nil {
				return nil, err
			}
			if err := l.Check(s.N); err != nil {
				return nil, err
			}
			if c == sched.AllToAll && !uniformRowColumn(s, rank) {
				return nil, fmt.Errorf("algo: %s %s needs one count for every pair", c, name)
			}
			p := newProg(s, rank)
			build(p, l)
			return p.program(name), nil
		},
		LinkCost: func(bytes float64, lc LinkCosts) float64 {
			if n <= 1 {
				return 0
			}
			return cost(l, bytes, lc)
		},
	}
}

// ringRS is a ring reduce-scatter among group (p.rank is a member) over the
// blocks span(0..g−1) of the vector: member i ends with block i reduced over
// the group in Out. fromIn says the data are still in In (the first sends
// and every reduction read In); otherwise they are in Out.
func ringRS(p *prog, group []int, span func(int) (int, int), fromIn bool) {
	g := len(group)
	i := slices.Index(group, p.rank)
	src := func(b int) sched.Region {
		o, n := span(b)
		if fromIn {
			return p.in(o, n)
		}
		return out(o, n)
	}
	dst := func(b int) sched.Region { o, n := span(b); return out(o, n) }
	next, prev := group[mod(i+1, g)], group[mod(i-1, g)]
	for k := range g - 1 {
		sb, rb := mod(i-k-1, g), mod(i-k-2, g)
		s := dst(sb)
		if k == 0 {
			s = src(sb)
		}
		p.step(sched.SendOp(next, s), sched.RecvReduceOp(prev, src(rb), dst(rb)))
	}
}

// ringAG is a ring allgather among group: member i holds block i in Out and
// ends with every block.
func ringAG(p *prog, group []int, span func(int) (int, int)) {
	g := len(group)
	i := slices.Index(group, p.rank)
	blk := func(b int) sched.Region { o, n := span(mod(b, g)); return out(o, n) }
	next, prev := group[mod(i+1, g)], group[mod(i-1, g)]
	for k := range g - 1 {
		p.step(sched.SendOp(next, blk(i-k)), sched.RecvOp(prev, blk(i-k-1)))
	}
}

// ringAR is a ring allreduce among group over blocks span(0..g−1).
func ringAR(p *prog, group []int, span func(int) (int, int), fromIn bool) {
	ringRS(p, group, span, fromIn)
	ringAG(p, group, span)
}

// orderedAllGather is ringAllGather with the ring in the layout's order.
func orderedAllGather(p *prog, l Layout) {
	n, r := p.n, p.rank
	d := p.displs()
	ord := l.Order()
	i := slices.Index(ord, r)
	blk := func(q int) sched.Region { b := ord[mod(q, n)]; return out(d[b], d[b+1]-d[b]) }
	own := p.in(0, p.count(r))
	if n == 1 {
		p.step(sched.CopyOp(own, blk(i)))
		return
	}
	next, prev := ord[mod(i+1, n)], ord[mod(i-1, n)]
	for k := range n - 1 {
		if k == 0 {
			p.step(sched.SendOp(next, own), sched.CopyOp(own, blk(i)), sched.RecvOp(prev, blk(i-1)))
			continue
		}
		p.step(sched.SendOp(next, blk(i-k)), sched.RecvOp(prev, blk(i-k-1)))
	}
}

// orderedReduceScatter is ringReduceScatter with the ring in the layout's
// order: the partial sums alive between steps live in two Scratch slots.
func orderedReduceScatter(p *prog, l Layout) {
	n, r := p.n, p.rank
	d := p.displs()
	c := p.count(r)
	if n == 1 {
		p.step(sched.CopyOp(p.in(0, c), out(0, c)))
		return
	}
	ord := l.Order()
	i := slices.Index(ord, r)
	cnt := func(b int) int { return d[b+1] - d[b] }
	at := func(q int) int { return ord[mod(q, n)] }
	slot := 0
	for k := range n - 2 {
		slot = max(slot, cnt(at(i-k-2)))
	}
	loc := func(k, b int) sched.Region {
		if k == n-2 {
			return out(0, c)
		}
		return scr((k%2)*slot, cnt(b))
	}
	next, prev := at(i+1), at(i-1)
	for k := range n - 1 {
		sb, rb := at(i-k-1), at(i-k-2)
		src := p.in(d[sb], cnt(sb))
		if k > 0 {
			src = loc(k-1, sb)
		}
		p.step(sched.SendOp(next, src), sched.RecvReduceOp(prev, p.in(d[rb], cnt(rb)), loc(k, rb)))
	}
}

// hierAllReduce is the multi-rail hierarchical allreduce. The vector is cut
// into R rails, R the most ranks on any host; on a host of L ranks, local
// rank i owns the rails of block i of R rails cut into L. (1) Each host
// reduce-scatters its ranks' vectors along that ownership, so every rank
// holds its rails reduced over its host. (2) For each run of rails whose
// owners are the same ranks on every host, those owners — one per host —
// allreduce the run around a ring of hosts; with equal hosts every rank
// carries 1/L of the inter-host traffic on its own link. (3) Each host
// allgathers the rails. With one host it is a ring allreduce; with one
// rank per host, a ring allreduce among hosts.
func hierAllReduce(p *prog, l Layout) {
	c := p.count(p.rank)
	if p.n == 1 {
		copyInToOut(p, c)
		return
	}
	rails := l.rails()
	H := len(l.Hosts)
	host, local := l.where(p.rank)
	mine := l.Hosts[host]
	L := len(mine)
	rl := blocks{c, rails} // elements of rail j: rl.off(j) .. rl.off(j+1)
	railsOf := func(L, i int) (lo, hi int) { return railRange(rails, L, i) }
	owner := func(h, j int) int { return l.railOwner(h, j) }
	localSpan := func(i int) (int, int) { lo, hi := railsOf(L, i); return rl.span(lo, hi) }
	// (1) intra-host reduce-scatter.
	if L > 1 {
		ringRS(p, mine, localSpan, true)
	} else {
		copyInToOut(p, c)
	}
	// (2) inter-host allreduce of each run of rails with one set of owners.
	if H > 1 {
		lo, hi := railsOf(L, local)
		for j := lo; j < hi; {
			group := make([]int, H)
			for h := range H {
				group[h] = owner(h, j)
			}
			end := j + 1
			for end < hi && sameOwners(group, end, owner) {
				end++
			}
			off, n := rl.span(j, end)
			sub := blocks{n, H}
			ringAR(p, group, func(b int) (int, int) { return off + sub.off(b), sub.size(b) }, false)
			j = end
		}
	}
	// (3) intra-host allgather.
	if L > 1 {
		ringAG(p, mine, localSpan)
	}
}

// rails returns the number of rails of the multi-rail algorithm: the most
// ranks on any host.
func (l Layout) rails() int {
	n := 0
	for _, rs := range l.Hosts {
		n = max(n, len(rs))
	}
	return n
}

// railRange returns the rails local rank i of an L-rank host owns.
func railRange(rails, L, i int) (lo, hi int) {
	o, n := sched.Block(rails, L, i)
	return o, o + n
}

// railOwner returns the rank of host h that owns rail j.
func (l Layout) railOwner(h, j int) int {
	rs := l.Hosts[h]
	for i := range rs {
		if lo, hi := railRange(l.rails(), len(rs), i); j >= lo && j < hi {
			return rs[i]
		}
	}
	return -1
}

// Rails returns, for each rail of the hierarchical AllReduce, the rank of
// each host that carries it between hosts.
func (l Layout) Rails() [][]int {
	out := make([][]int, l.rails())
	for j := range out {
		for h := range l.Hosts {
			out[j] = append(out[j], l.railOwner(h, j))
		}
	}
	return out
}

// sameOwners reports whether rail j has the owners group lists, host by
// host.
func sameOwners(group []int, j int, owner func(h, j int) int) bool {
	for h, r := range group {
		if owner(h, j) != r {
			return false
		}
	}
	return true
}

// binomialIn runs a binomial-tree broadcast of region among group from
// group[root]: each member receives once from its parent, then sends to
// its children, farthest first.
func binomialIn(p *prog, group []int, root int, region sched.Region) {
	g := len(group)
	v := mod(slices.Index(group, p.rank)-root, g)
	at := func(u int) int { return group[mod(u+root, g)] }
	mask := 1
	for mask < g {
		if v&mask != 0 {
			p.step(sched.RecvOp(at(v-mask), region))
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if v+mask < g {
			p.step(sched.SendOp(at(v+mask), region))
		}
	}
}

// hierBroadcast: a binomial tree among one rank per host (the root on its
// host, each other host's first rank), then a binomial tree inside each
// host from that rank. Every message between hosts carries m once per
// receiving host.
func hierBroadcast(p *prog, l Layout) {
	root := p.s.Root
	rh, _ := l.where(root)
	host, _ := l.where(p.rank)
	c := p.count(p.rank)
	leader := func(h int) int {
		if h == rh {
			return root
		}
		return l.Hosts[h][0]
	}
	leaders := make([]int, len(l.Hosts))
	for h := range leaders {
		leaders[h] = leader(h)
	}
	if p.rank == leaders[host] && len(leaders) > 1 {
		binomialIn(p, leaders, rh, out(0, c))
	}
	if mine := l.Hosts[host]; len(mine) > 1 {
		binomialIn(p, mine, slices.Index(mine, leaders[host]), out(0, c))
	}
}

// hierBarrier: every rank signals its host's first rank, the first ranks
// run a dissemination barrier among themselves, then release their hosts.
func hierBarrier(p *prog, l Layout) {
	host, local := l.where(p.rank)
	mine := l.Hosts[host]
	none, sink := sched.R(sched.In, 0, 0), out(0, 0)
	if local != 0 {
		p.step(sched.SendOp(mine[0], none))
		p.step(sched.RecvOp(mine[0], sink))
		return
	}
	var ops []sched.Op
	for _, r := range mine[1:] {
		ops = append(ops, sched.RecvOp(r, sink))
	}
	p.step(ops...)
	H := len(l.Hosts)
	for d := 1; d < H; d *= 2 {
		p.step(sched.SendOp(l.Hosts[mod(host+d, H)][0], none), sched.RecvOp(l.Hosts[mod(host-d, H)][0], sink))
	}
	ops = ops[:0]
	for _, r := range mine[1:] {
		ops = append(ops, sched.SendOp(r, none))
	}
	p.step(ops...)
}

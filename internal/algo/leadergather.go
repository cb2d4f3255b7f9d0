package algo

import (
	"slices"

	"github.com/hcomm-go/hcomm/internal/sched"
)

// leaderAllGather is the small-message allgather: the ranks of each host
// send their blocks to the host's first rank (one step, the leader
// receiving from all), the leaders pass their hosts' blocks around a ring,
// and each leader broadcasts the whole vector inside its host (binomial).
// Only the leaders send between hosts, one message a step each: where the
// flat recursive doubling or the multi-rail form have every rank of a
// host send between hosts at once. A host whose blocks do not lie side by
// side in the output (interleaved placement) travels packed in Scratch,
// laid out host after host, and is unpacked by each leader that receives
// it.
func leaderAllGather(p *prog, l Layout) {
	d := p.displs()
	T := d[p.n]
	blk := func(q int) sched.Region { return out(d[q], d[q+1]-d[q]) }
	p.step(sched.CopyOp(p.in(0, p.count(p.rank)), blk(p.rank)))
	if p.n == 1 {
		return
	}
	host, local := l.where(p.rank)
	mine := l.Hosts[host]
	if local != 0 {
		p.step(sched.SendOp(mine[0], blk(p.rank)))
	} else if len(mine) > 1 {
		var ops []sched.Op
		for _, r := range mine[1:] {
			ops = append(ops, sched.RecvOp(r, blk(r)))
		}
		p.step(ops...)
	}
	if H := len(l.Hosts); local == 0 && H > 1 {
		hd := l.hostData(d)
		if pack := hd.copies(host, d, true); len(pack) > 0 {
			p.step(pack...)
		}
		next, prev := l.Hosts[mod(host+1, H)][0], l.Hosts[mod(host-1, H)][0]
		for k := range H - 1 {
			p.step(sched.SendOp(next, hd.region(mod(host-k, H))), sched.RecvOp(prev, hd.region(mod(host-k-1, H))))
		}
		var unpack []sched.Op
		for h := range H {
			if h != host {
				unpack = append(unpack, hd.copies(h, d, false)...)
			}
		}
		if len(unpack) > 0 {
			p.step(unpack...)
		}
	}
	if len(mine) > 1 {
		binomialIn(p, mine, 0, out(0, T))
	}
}

// hostData says where each host's blocks travel between hosts: as one
// run of Out when the host's ranks' blocks lie side by side there (the
// ranks between them, if any, contributing nothing), else packed in
// Scratch at off[h], in the host's rank order.
type hostData struct {
	hosts  [][]int // each host's ranks, ascending
	packed []bool
	off    []int // Scratch offset of a packed host
	run    []sched.Region
}

func (l Layout) hostData(d []int) hostData {
	H := len(l.Hosts)
	hd := hostData{hosts: make([][]int, H), packed: make([]bool, H), off: make([]int, H), run: make([]sched.Region, H)}
	at := 0
	for h, rs := range l.Hosts {
		s := slices.Sorted(slices.Values(rs))
		hd.hosts[h] = s
		for i := 1; i < len(s); i++ {
			if d[s[i-1]+1] != d[s[i]] {
				hd.packed[h] = true
			}
		}
		if hd.packed[h] {
			hd.off[h] = at
			size := 0
			for _, r := range s {
				size += d[r+1] - d[r]
			}
			hd.run[h] = scr(at, size)
			at += size
		} else {
			lo, hi := s[0], s[len(s)-1]
			hd.run[h] = out(d[lo], d[hi+1]-d[lo])
		}
	}
	return hd
}

// region is where host h's blocks travel.
func (hd hostData) region(h int) sched.Region { return hd.run[h] }

// copies returns the copies that pack host h's blocks from Out into
// Scratch (pack) or unpack them back; none for a host that is not packed.
func (hd hostData) copies(h int, d []int, pack bool) []sched.Op {
	if !hd.packed[h] {
		return nil
	}
	var ops []sched.Op
	at := hd.off[h]
	for _, r := range hd.hosts[h] {
		n := d[r+1] - d[r]
		if n > 0 {
			if pack {
				ops = append(ops, sched.CopyOp(out(d[r], n), scr(at, n)))
			} else {
				ops = append(ops, sched.CopyOp(scr(at, n), out(d[r], n)))
			}
		}
		at += n
	}
	return ops
}

// leaderAllGatherCost: the leader receives its host's L−1 blocks one at a
// time, the leaders' ring moves a host's L blocks a step for H−1 steps
// (one message leaving each host), and the binomial broadcast inside a
// host moves the whole vector ⌈log2 L⌉ times.
func leaderAllGatherCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, H, L, _ := l.shape()
	block := bytes / float64(n)
	return float64(L-1)*lc.Intra.time(block) + float64(H-1)*lc.Inter.time(float64(L)*block) + lg(L)*lc.Intra.time(bytes)
}

// leaderReduceScatter is the small-message reduce-scatter, the leader
// AllGather run backwards: a binomial reduction of the whole vector
// inside each host to its first rank, a ring reduce-scatter among the
// leaders in which a host's blocks travel together (packed in Scratch,
// host after host, in the host's rank order), and the leader sending each
// rank of its host its block (one step). Only the leaders send between
// hosts, one message a step each.
func leaderReduceScatter(p *prog, l Layout) {
	d := p.displs()
	T := d[p.n]
	c := p.count(p.rank)
	if p.n == 1 {
		p.step(sched.CopyOp(p.in(0, c), out(0, c)))
		return
	}
	host, _ := l.where(p.rank)
	mine := l.Hosts[host]
	cur, sent := reduceIn(p, mine, 0, p.in(0, T), scr(0, T))
	if sent {
		p.step(sched.RecvOp(mine[0], out(0, c)))
		return
	}
	// The partial sums of block q, after the reduction inside the host.
	part := func(q int) sched.Region {
		if cur.Buf == sched.Scratch {
			return scr(cur.Off+d[q], d[q+1]-d[q])
		}
		return p.in(d[q], d[q+1]-d[q])
	}
	// Packed: host h's blocks at Scratch[base+at[h], base+at[h+1]),
	// block q at base+pos[q]. When that is where the reduction left them
	// (consecutive placement), nothing moves.
	H := len(l.Hosts)
	at := make([]int, H+1)
	pos := make([]int, p.n)
	same := cur.Buf == sched.Scratch
	for h, rs := range l.Hosts {
		at[h+1] = at[h]
		for _, q := range slices.Sorted(slices.Values(rs)) {
			pos[q] = at[h+1]
			at[h+1] += d[q+1] - d[q]
			if d[q+1] > d[q] && pos[q] != d[q] {
				same = false
			}
		}
	}
	base := T
	if same {
		base = cur.Off
	}
	var pack []sched.Op
	for q := range p.n {
		if n := d[q+1] - d[q]; n > 0 && !same {
			pack = append(pack, sched.CopyOp(part(q), scr(base+pos[q], n)))
		}
	}
	for q := range pos {
		pos[q] += base
	}
	packed := func(h int) sched.Region { return scr(base+at[h], at[h+1]-at[h]) }
	if H > 1 {
		if len(pack) > 0 {
			p.step(pack...)
		}
		next, prev := l.Hosts[mod(host+1, H)][0], l.Hosts[mod(host-1, H)][0]
		for k := range H - 1 {
			sb, rb := mod(host-k-1, H), mod(host-k-2, H)
			p.step(sched.SendOp(next, packed(sb)), sched.RecvReduceOp(prev, packed(rb), packed(rb)))
		}
	}
	// Block q of this host, reduced over every host.
	final := func(q int) sched.Region {
		if H > 1 {
			return scr(pos[q], d[q+1]-d[q])
		}
		return part(q)
	}
	ops := []sched.Op{sched.CopyOp(final(p.rank), out(0, c))}
	for _, r := range mine[1:] {
		ops = append(ops, sched.SendOp(r, final(r)))
	}
	p.step(ops...)
}

// leaderReduceScatterCost: the binomial reduction moves and reduces the
// whole vector ⌈log2 L⌉ times, the leaders' ring a host's L blocks a step
// for H−1 steps, and the leader sends its host's L−1 blocks one at a
// time.
func leaderReduceScatterCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, H, L, _ := l.shape()
	block := bytes / float64(n)
	return lg(L)*(lc.Intra.time(bytes)+lc.Gamma*bytes) +
		float64(H-1)*(lc.Inter.time(float64(L)*block)+lc.Gamma*float64(L)*block) +
		float64(L-1)*lc.Intra.time(block)
}

// leaderAllToAll is the small-message AllToAll of a uniform matrix (c
// elements a block): each rank of a host sends its row to the host's
// first rank (one step), the leaders exchange, host pair by host pair,
// the blocks their hosts' ranks send each other (one message per pair,
// packed in Scratch), and each leader sends each rank of its host its
// column, packed in source order, straight into its Out. Only the leaders
// send between hosts, one message a step each. The leader works from
// Scratch (its own row copied there first), so in place is no different.
func leaderAllToAll(p *prog, l Layout) {
	n := p.n
	c := p.s.Matrix[p.rank][p.rank]
	row := n * c
	if n == 1 {
		p.step(sched.CopyOp(p.in(0, c), out(0, c)))
		return
	}
	host, local := l.where(p.rank)
	mine := l.Hosts[host]
	if local != 0 {
		p.step(sched.SendOp(mine[0], p.in(0, row)))
		p.step(sched.RecvOp(mine[0], out(0, row)))
		return
	}
	L, H := len(mine), len(l.Hosts)
	// Scratch: the host's rows (local rank i's at i·row), then per other
	// host g the pack sent to it and the pack received from it (L·L_g
	// blocks each: source-major in the sender's host order), then the
	// columns of the other local ranks.
	rows := func(i, dest int) sched.Region { return scr(i*row+dest*c, c) }
	at := L * row
	sendAt, recvAt := make([]int, H), make([]int, H)
	for g := range H {
		if g != host {
			sendAt[g] = at
			recvAt[g] = at + L*len(l.Hosts[g])*c
			at += 2 * L * len(l.Hosts[g]) * c
		}
	}
	colAt := at
	ops := []sched.Op{sched.CopyOp(p.in(0, row), scr(0, row))}
	for i, r := range mine[1:] {
		ops = append(ops, sched.RecvOp(r, scr((i+1)*row, row)))
	}
	p.step(ops...)
	if H > 1 {
		ops = ops[:0]
		for g, rs := range l.Hosts {
			if g == host {
				continue
			}
			for i := range L {
				for j, d := range rs {
					ops = append(ops, sched.CopyOp(rows(i, d), scr(sendAt[g]+(i*len(rs)+j)*c, c)))
				}
			}
		}
		p.step(ops...)
		for k := 1; k < H; k++ {
			to, from := mod(host+k, H), mod(host-k, H)
			p.step(sched.SendOp(l.Hosts[to][0], scr(sendAt[to], L*len(l.Hosts[to])*c)),
				sched.RecvOp(l.Hosts[from][0], scr(recvAt[from], len(l.Hosts[from])*L*c)))
		}
	}
	// Block from source s to local rank j (of this host).
	block := func(s, j int) sched.Region {
		g, i := l.where(s)
		if g == host {
			return rows(i, mine[j])
		}
		return scr(recvAt[g]+(i*L+j)*c, c)
	}
	ops = ops[:0]
	for j := 1; j < L; j++ {
		for s := range n {
			ops = append(ops, sched.CopyOp(block(s, j), scr(colAt+(j-1)*row+s*c, c)))
		}
	}
	for s := range n {
		ops = append(ops, sched.CopyOp(block(s, 0), out(s*c, c)))
	}
	p.step(ops...)
	if L > 1 {
		ops = ops[:0]
		for j, r := range mine[1:] {
			ops = append(ops, sched.SendOp(r, scr(colAt+j*row, row)))
		}
		p.step(ops...)
	}
}

// leaderAllToAllCost: the leader receives its host's L−1 rows one at a
// time, exchanges L·L_g blocks with each other host's leader in turn, and
// sends L−1 columns; bytes is a rank's row. The leader alone also copies
// about 2L+1 rows (its own row aside, the packs, the columns), priced at
// γ: with them the form loses to pairwise where it measured slower (2 × 2
// namespaces at 1 Gbit/s, 256 KiB rows: 2.52 ms against 2.22).
func leaderAllToAllCost(l Layout, bytes float64, lc LinkCosts) float64 {
	n, H, L, _ := l.shape()
	block := bytes / float64(n)
	return 2*float64(L-1)*lc.Intra.time(bytes) + float64(H-1)*lc.Inter.time(float64(L*L)*block) + float64(2*L+1)*lc.Gamma*bytes
}

package algo

import "github.com/hcomm-go/hcomm/internal/sched"

// The rail forms of AllReduce and Barrier, for the smallest messages: the
// hosts' exchange runs on every rail at once instead of through one
// leader per host, so no step inside a host precedes it.
//
//	coll       algo  steps                                     inter-host (per rank)
//	AllReduce  rail  ⌊log2 H⌋ (+2) + ⌊log2 L⌋ (+2) (+ folds)    ⌊log2 H⌋ (+2) messages of m
//	Barrier    rail  ⌈log2 H⌉ + ⌈log2 L⌉ (+ folds)              ⌈log2 H⌉ empty messages
//
// With L the fewest ranks on a host: local rank i < L of every host is on
// rail i. (1) A rank of local index i ≥ L folds its vector into local rank
// i mod L of its host (only on hosts with more than L ranks). (2) The
// members of each rail, one per host, run recursive doubling (AllReduce)
// or a dissemination barrier among themselves: every rail crosses between
// hosts at once, each on its own rank. (3) The first L ranks of each host
// do the same among themselves, which completes the sum (each holds its
// rail's sum over every host). (4) The folded ranks get the result back.
// On 2 hosts × 2 ranks an AllReduce is one exchange between hosts and one
// inside each, where the leader form puts a step inside the host on
// either side of the exchange.

// railWidth returns the rails of the rail forms: the fewest ranks on a
// host.
func (l Layout) railWidth() int {
	_, _, _, lmin := l.shape()
	return lmin
}

// railFolds returns the local ranks of host h that fold into local rank i
// (i < width): i+width, i+2·width, ….
func (l Layout) railFolds(h, i, width int) []int {
	rs := l.Hosts[h]
	var out []int
	for j := i + width; j < len(rs); j += width {
		out = append(out, rs[j])
	}
	return out
}

// railAllReduce is the rail AllReduce (see above).
func railAllReduce(p *prog, l Layout) {
	c := p.count(p.rank)
	if p.n == 1 {
		copyInToOut(p, c)
		return
	}
	host, local := l.where(p.rank)
	mine := l.Hosts[host]
	w := l.railWidth()
	res := out(0, c)
	if local >= w {
		to := mine[local%w]
		p.step(sched.SendOp(to, p.in(0, c)))
		p.step(sched.RecvOp(to, res))
		return
	}
	cur := p.in(0, c)
	folds := l.railFolds(host, local, w)
	for _, f := range folds {
		p.step(sched.RecvReduceOp(f, cur, res))
		cur = res
	}
	rail := make([]int, len(l.Hosts))
	for h, rs := range l.Hosts {
		rail[h] = rs[local]
	}
	// Both phases alternate the running sum between Out and Scratch; when
	// it starts in In, pick the first so that the last lands in Out (no
	// copy at the end).
	kr, extraRail := rdRounds(rail, p.rank)
	kh, extraHost := rdRounds(mine[:w], p.rank)
	toScratch := !extraRail && !extraHost && (kr+kh)%2 == 0
	cur = rdInFrom(p, rail, cur, toScratch)
	cur = rdIn(p, mine[:w], cur)
	if cur != res {
		p.step(sched.CopyOp(cur, res))
	}
	if len(folds) > 0 {
		ops := make([]sched.Op, len(folds))
		for k, f := range folds {
			ops[k] = sched.SendOp(f, res)
		}
		p.step(ops...)
	}
}

// railBarrier is the rail Barrier (see above).
func railBarrier(p *prog, l Layout) {
	host, local := l.where(p.rank)
	mine := l.Hosts[host]
	w := l.railWidth()
	none, sink := sched.R(sched.In, 0, 0), out(0, 0)
	if local >= w {
		to := mine[local%w]
		p.step(sched.SendOp(to, none))
		p.step(sched.RecvOp(to, sink))
		return
	}
	folds := l.railFolds(host, local, w)
	if len(folds) > 0 {
		ops := make([]sched.Op, len(folds))
		for k, f := range folds {
			ops[k] = sched.RecvOp(f, sink)
		}
		p.step(ops...)
	}
	rail := make([]int, len(l.Hosts))
	for h, rs := range l.Hosts {
		rail[h] = rs[local]
	}
	disseminateIn(p, rail)
	disseminateIn(p, mine[:w])
	if len(folds) > 0 {
		ops := make([]sched.Op, len(folds))
		for k, f := range folds {
			ops[k] = sched.SendOp(f, none)
		}
		p.step(ops...)
	}
}

// disseminateIn runs a dissemination barrier among group (p.rank is a
// member): in round k member v signals v+2^k and hears from v−2^k.
func disseminateIn(p *prog, group []int) {
	g := len(group)
	v := -1
	for i, r := range group {
		if r == p.rank {
			v = i
		}
	}
	none, sink := sched.R(sched.In, 0, 0), out(0, 0)
	for d := 1; d < g; d *= 2 {
		p.step(sched.SendOp(group[mod(v+d, g)], none), sched.RecvOp(group[mod(v-d, g)], sink))
	}
}

func railAllReduceCost(l Layout, bytes float64, lc LinkCosts) float64 {
	_, H, L, w := l.shape()
	rd := func(g int) (msgs, reduces float64) {
		rounds, fold := float64(floorLog2(g)), 0.0
		if g&(g-1) != 0 {
			fold = 1
		}
		return rounds + 2*fold, rounds + fold
	}
	interMsgs, interRed := rd(H)
	intraMsgs, intraRed := rd(w)
	folds := float64((L+w-1)/w - 1)
	if folds > 0 {
		intraMsgs += folds + 1
		intraRed += folds
	}
	return interMsgs*lc.railInter(w, bytes) + intraMsgs*lc.Intra.time(bytes) + lc.Gamma*bytes*(interRed+intraRed)
}

func railBarrierCost(l Layout, _ float64, lc LinkCosts) float64 {
	_, H, L, w := l.shape()
	intra := lg(w)
	if L > w {
		intra += 2
	}
	return intra*lc.Intra.Alpha + lg(H)*lc.railInter(w, 0)
}

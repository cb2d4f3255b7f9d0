package algo

import "github.com/hcomm-go/hcomm/internal/sched"

// disseminationBarrier: in round k rank r sends an empty message to r+2^k
// and waits for one from r−2^k; after ⌈log2 n⌉ rounds every rank has heard,
// directly or not, from every rank.
func disseminationBarrier(p *prog) {
	n, r := p.n, p.rank
	for h := 1; h < n; h *= 2 {
		p.step(sched.SendOp(mod(r+h, n), sched.R(sched.In, 0, 0)), sched.RecvOp(mod(r-h, n), out(0, 0)))
	}
}

// disseminationBarrierCost: ⌈log2 p⌉ rounds of empty messages.
func disseminationBarrierCost(sh Shape) Cost {
	return Cost{Alpha: float64(ceilLog2(sh.P))}
}

package plan

import (
	"math"
	"slices"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// SetLayout tells the planner how its ranks sit on hosts. From then on the
// layout's algorithms (algo.ForLayout) are candidates next to the flat
// ones: AllReduce compares the hierarchical and host-ordered rings with
// the best flat algorithm, intra-host links costed with MemoryModel and
// inter-host links with the planner's model; AllGather and ReduceScatter
// take the host-ordered ring where the flat ring (or, for AllGather,
// recursive doubling) would be chosen; Barrier
// and Broadcast the hierarchical forms when they cost less. An override
// naming a layout algorithm (HCOMM_ALGO=allreduce=hier) selects it. Call
// it before the first collective.
func (p *Planner) SetLayout(l algo.Layout) error {
	if err := l.Check(p.n); err != nil {
		return err
	}
	p.layout = algo.ForLayout(l)
	p.hosts = len(l.Hosts)
	p.lay = l
	return nil
}

// layoutAlgo returns the layout algorithm of c named name.
func (p *Planner) layoutAlgo(c sched.Coll, name string) (algo.Algorithm, bool) {
	algos := p.layout
	if algos == nil {
		// Without a layout, every rank is on one host in rank order.
		algos = algo.ForLayout(algo.FlatLayout(p.n))
	}
	for _, a := range algos {
		if a.Coll == c && a.Name == name {
			return a, true
		}
	}
	return algo.Algorithm{}, false
}

// SetInterLink sets the cost of a message between hosts (default: the
// planner's model): the layout algorithms' messages between hosts are
// costed with it, and so are the flat algorithms' (see onHosts). Init sets it from the NIC speed or
// the topology file's link speed on a communicator that spans hosts. Call
// it before the first collective.
func (p *Planner) SetInterLink(l algo.Link) {
	p.inter = &l
	p.model.Alpha, p.model.Beta = l.Alpha, l.Beta
}

// InterLink returns what SetInterLink set, and false if it was not called.
func (p *Planner) InterLink() (algo.Link, bool) {
	if p.inter == nil {
		return algo.Link{}, false
	}
	return *p.inter, true
}

// Layout returns the layout SetLayout set, and false if there is none.
func (p *Planner) Layout() (algo.Layout, bool) { return p.lay, p.layout != nil }

// linkCosts returns the link classes the layout algorithms are costed with.
func (p *Planner) linkCosts() algo.LinkCosts {
	lc := algo.LinkCosts{Intra: algo.Link{Alpha: MemoryModel.Alpha, Beta: MemoryModel.Beta},
		Inter: algo.Link{Alpha: p.model.Alpha, Beta: p.model.Beta}, Gamma: p.model.Gamma}
	if p.inter != nil {
		lc.Inter = *p.inter
	}
	return lc
}

// layoutColls are the collectives with layout algorithms.
var layoutColls = []sched.Coll{sched.AllReduce, sched.AllGather, sched.ReduceScatter, sched.Broadcast, sched.Reduce, sched.Barrier}

// maxLinkRanks is the most ranks whose flat programs the planner prices
// link by link (onHosts); a larger communicator spanning hosts prices them
// as if every message crossed hosts.
const maxLinkRanks = 64

// pricesLinks reports whether the flat algorithms for s are priced link by
// link: on a communicator spanning hosts, of at most maxLinkRanks ranks,
// for a call every rank knows alike (the same count from every rank).
func (p *Planner) pricesLinks(s sched.Spec, elemSize int) bool {
	if p.hosts <= 1 || s.N > maxLinkRanks || s.N != p.n {
		return false
	}
	_, uniform := p.keyOf(s, elemSize)
	return uniform
}

// onHosts prices the flat algorithm a on the call s by the links its
// messages take: cost (what a's cost function gives with every message
// between hosts) scaled by the critical path of a's programs on the
// layout — messages within a host at MemoryModel's α and β, messages
// between hosts at the inter-host link, the messages leaving a host taking
// turns on its NIC — over their critical path with every message priced
// as one between hosts. The ratio keeps what the cost function knows and
// the critical path does not (pipelining) and charges what it does not
// know: which messages stay inside a host and which share a NIC. The call
// is priced out of place, as Choose prices it.
func (p *Planner) onHosts(a algo.Algorithm, s sched.Spec, elemSize int, cost float64) float64 {
	s.InPlace = false
	progs := make([]*sched.Program, s.N)
	for r := range progs {
		prog, err := a.Build(s, r)
		if err != nil {
			return cost
		}
		progs[r] = prog
	}
	lc := p.linkCosts()
	es := float64(elemSize)
	inter := sched.Rates{Alpha: lc.Inter.Alpha, Beta: lc.Inter.Beta * es, Gamma: p.model.Gamma * es, Delta: p.model.Delta * es}
	intra := sched.Rates{Alpha: lc.Intra.Alpha, Beta: lc.Intra.Beta * es, Gamma: inter.Gamma, Delta: inter.Delta}
	all, err := sched.CriticalPath(progs, inter)
	if err != nil || all <= 0 {
		return cost
	}
	host := make([]int, s.N)
	for h, rs := range p.lay.Hosts {
		for _, r := range rs {
			host[r] = h
		}
	}
	linked, err := sched.CriticalPathHosts(progs, intra, sched.Hosts{Host: host, Inter: sched.Rates{Alpha: inter.Alpha, Beta: inter.Beta}})
	if err != nil {
		return cost
	}
	return cost * linked / all
}

// chooseLayout applies the layout's algorithms to the flat choice best
// (of cost bestCost): the layout algorithm of the least link cost
// (Algorithm.LinkCost) replaces best when it costs less. When the flat
// algorithms were priced link by link (linked, see onHosts), bestCost is
// compared as it is. Otherwise — a communicator of more than maxLinkRanks
// ranks — the flat ring's cost is raised to what its host crossings cost,
// and a flat AllGather or ReduceScatter ring or recursive doubling, whose
// partners ignore the hosts, is always replaced.
func (p *Planner) chooseLayout(s sched.Spec, elemSize int, best algo.Algorithm, bestCost float64, linked bool) algo.Algorithm {
	if p.hosts <= 1 || !slices.Contains(layoutColls, s.Coll) {
		return best
	}
	lc := p.linkCosts()
	bytes, _ := callBytes(s, elemSize)
	switch {
	case linked:
	case s.Coll == sched.AllReduce && best.Name == "ring":
		// The flat model does not see a ring's host crossings.
		bestCost = math.Max(bestCost, algo.FlatRingCost(p.lay, bytes, lc))
	case (s.Coll == sched.AllGather || s.Coll == sched.ReduceScatter) && (best.Name == "ring" || best.Name == "rd"):
		bestCost = math.Inf(1)
	}
	var pick algo.Algorithm
	pickCost := math.Inf(1)
	for _, a := range p.layout {
		if a.Coll != s.Coll || !a.Supports(s) {
			continue
		}
		if c := a.LinkCost(bytes, lc); c < pickCost {
			pick, pickCost = a, c
		}
	}
	if pick.Build != nil && (pickCost < bestCost || math.IsInf(bestCost, 1)) {
		return pick
	}
	return best
}

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
	p.mu.Lock()
	clear(p.ratios)
	p.mu.Unlock()
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
	p.mu.Lock()
	clear(p.ratios)
	p.mu.Unlock()
}

// SetCrowd tells the planner how many ranks share each CPU on the most
// crowded kernel of the layout (topo.Topology.Crowd; 0, the default, or at
// most 1: every rank has a CPU of its own). Network namespaces of one
// machine are hosts of their own that share its CPUs: there, messages
// that several ranks of a host send between hosts at once take turns on
// the CPUs instead of overlapping (algo.LinkCosts.Crowd), which makes the
// rail forms of AllReduce and Barrier cost more than the leader forms.
// Call it before the first collective.
func (p *Planner) SetCrowd(c float64) {
	p.crowd = c
}

// Crowd returns what SetCrowd set.
func (p *Planner) Crowd() float64 { return p.crowd }

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
		Inter: algo.Link{Alpha: p.model.Alpha, Beta: p.model.Beta}, Gamma: p.model.Gamma, Crowd: p.crowd}
	if p.inter != nil {
		lc.Inter = *p.inter
	}
	return lc
}

// layoutColls are the collectives with layout algorithms.
var layoutColls = []sched.Coll{sched.AllReduce, sched.AllGather, sched.ReduceScatter, sched.Broadcast, sched.Reduce, sched.Barrier, sched.AllToAll}

// maxLinkRanks is the most ranks whose flat programs the planner prices
// link by link (onHosts); a larger communicator spanning hosts prices them
// as if every message crossed hosts.
const maxLinkRanks = 16

// pricesLinks reports whether the flat algorithms for s are priced link by
// link: on a communicator spanning hosts, of at most maxLinkRanks ranks,
// for a collective with layout algorithms and a call every rank knows
// alike (the same count from every rank).
func (p *Planner) pricesLinks(s sched.Spec, elemSize int) bool {
	if p.hosts <= 1 || s.N > maxLinkRanks || s.N != p.n || !slices.Contains(layoutColls, s.Coll) {
		return false
	}
	_, uniform := p.keyOf(s, elemSize)
	return uniform
}

// linkKey identifies the programs whose link ratios are cached: an
// algorithm of a collective, and the root of a rooted one.
type linkKey struct {
	coll sched.Coll
	name string
	root int
}

// linkRatios are what placing an algorithm's messages on their links does
// to its critical path: the latency part (Alpha) and the bytes part
// (Beta), each the critical path with every message on the link it takes
// over the critical path with every message between hosts.
type linkRatios struct{ alpha, beta float64 }

// onHosts prices the flat algorithm a on the call s by the links its
// messages take. a's cost function gives the messages (α) and bytes (β)
// on its critical path with every message between hosts; each part is
// scaled by its linkRatios, measured once per algorithm (and root) on a's
// programs for all ranks with sched.CriticalPathHosts — messages within a
// host at MemoryModel's α and β, between hosts at the inter-host link, the
// messages leaving a host taking turns on its NIC. The scaling keeps what the
// cost function knows and the critical path does not (pipelining) and
// charges what it does not know: which messages stay inside a host and
// which share a NIC. ok is false when the ratios cannot be measured.
func (p *Planner) onHosts(a algo.Algorithm, s sched.Spec, elemSize int) (cost float64, ok bool) {
	r, ok := p.linkRatios(a, s)
	if !ok {
		return 0, false
	}
	bytes, _ := callBytes(s, elemSize)
	c := a.Cost(algo.Shape{P: s.N, Root: s.Root, N: bytes, Chunk: float64(p.model.Chunk)})
	m := p.model
	return c.Alpha*m.Alpha*r.alpha + c.Beta*m.Beta*bytes*r.beta + (c.Gamma*m.Gamma+c.Delta*m.Delta)*bytes, true
}

// linkSample is the count per rank of the calls whose programs measure
// link ratios: large enough that no rank's block is empty.
const linkSample = 64 * maxLinkRanks

func (p *Planner) linkRatios(a algo.Algorithm, s sched.Spec) (linkRatios, bool) {
	k := linkKey{coll: s.Coll, name: a.Name, root: s.Root}
	p.mu.Lock()
	r, ok := p.ratios[k]
	p.mu.Unlock()
	if ok {
		return r, r.alpha > 0
	}
	r = p.measureRatios(a, sched.Uniform(s.Coll, s.N, linkSample, s.Root, false))
	p.mu.Lock()
	if p.ratios == nil {
		p.ratios = map[linkKey]linkRatios{}
	}
	p.ratios[k] = r
	p.mu.Unlock()
	return r, r.alpha > 0
}

// measureRatios measures a's link ratios on s (zero when it cannot).
func (p *Planner) measureRatios(a algo.Algorithm, s sched.Spec) linkRatios {
	if s.Coll == sched.Barrier {
		s = sched.Spec{Coll: sched.Barrier, N: s.N}
	}
	if !a.Supports(s) {
		return linkRatios{}
	}
	progs := make([]*sched.Program, s.N)
	for r := range progs {
		prog, err := a.Build(s, r)
		if err != nil {
			return linkRatios{}
		}
		progs[r] = prog
	}
	host := make([]int, s.N)
	for h, rs := range p.lay.Hosts {
		for _, r := range rs {
			host[r] = h
		}
	}
	lc := p.linkCosts()
	ratio := func(intra, inter sched.Rates) float64 {
		all, err := sched.CriticalPath(progs, inter)
		if err != nil || all <= 0 {
			return 0
		}
		linked, err := sched.CriticalPathHosts(progs, intra, sched.Hosts{Host: host, Inter: inter})
		if err != nil {
			return 0
		}
		return linked / all
	}
	r := linkRatios{
		alpha: ratio(sched.Rates{Alpha: lc.Intra.Alpha / lc.Inter.Alpha}, sched.Rates{Alpha: 1}),
		beta:  ratio(sched.Rates{Beta: lc.Intra.Beta / lc.Inter.Beta}, sched.Rates{Beta: 1}),
	}
	if s.Coll == sched.Barrier {
		r.beta = 1
	}
	if r.alpha <= 0 || r.beta <= 0 {
		return linkRatios{}
	}
	return r
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

// HostLink is the cost of a message between hosts: NetworkModel's, slowed
// to the speed of the links between hosts — the topology file's inter-host
// link speed as given (fileGbps), else the slowest data NIC's (nicGbps),
// which cannot make the model faster than the default (TCP seldom fills a
// fast NIC). It reports false when neither is known (zero).
func HostLink(fileGbps, nicGbps float64) (algo.Link, bool) {
	l := algo.Link{Alpha: NetworkModel.Alpha, Beta: NetworkModel.Beta}
	switch {
	case fileGbps > 0:
		l.Beta = 8 / (fileGbps * 1e9)
	case nicGbps > 0:
		l.Beta = max(l.Beta, 8/(nicGbps*1e9))
	default:
		return l, false
	}
	return l, true
}

// Inherit gives q, the planner of a communicator made of p's ranks
// parents (parents[i] is p's rank of q's rank i), p's layout restricted to
// those ranks and, when they still span hosts, p's link between hosts. It
// does nothing when p has no layout.
func (q *Planner) Inherit(p *Planner, parents []int) error {
	l, ok := p.Layout()
	if !ok {
		return nil
	}
	sl := l.Sub(parents)
	if err := q.SetLayout(sl); err != nil {
		return err
	}
	if in, ok := p.InterLink(); ok && len(sl.Hosts) > 1 {
		q.SetInterLink(in)
	}
	q.SetCrowd(p.Crowd())
	return nil
}

// OneHost reports whether p's ranks parents all sit on one host of p's
// layout (false when p has none): a communicator of them is all shared
// memory.
func (p *Planner) OneHost(parents []int) bool {
	l, ok := p.Layout()
	return ok && len(l.Sub(parents).Hosts) == 1
}

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

// chooseLayout applies the layout's algorithms to the flat choice best
// (of cost bestCost).
func (p *Planner) chooseLayout(s sched.Spec, elemSize int, best algo.Algorithm, bestCost float64) algo.Algorithm {
	if p.hosts <= 1 || !slices.Contains([]sched.Coll{sched.AllReduce, sched.AllGather, sched.ReduceScatter, sched.Broadcast, sched.Barrier}, s.Coll) {
		return best
	}
	if s.Coll == sched.AllGather || s.Coll == sched.ReduceScatter {
		// Recursive doubling's partners ignore the hosts as the flat
		// ring's order does.
		if best.Name == "ring" || (s.Coll == sched.AllGather && best.Name == "rd") {
			if a, ok := p.layoutAlgo(s.Coll, "hring"); ok && a.Supports(s) {
				return a
			}
		}
		return best
	}
	lc := algo.LinkCosts{Intra: algo.Link{Alpha: MemoryModel.Alpha, Beta: MemoryModel.Beta},
		Inter: algo.Link{Alpha: p.model.Alpha, Beta: p.model.Beta}, Gamma: p.model.Gamma}
	bytes := 0.0
	if s.Coll != sched.Barrier {
		bytes = float64(s.Count(0) * elemSize)
	}
	if best.Name == "ring" && s.Coll == sched.AllReduce {
		// The flat model does not see a ring's host crossings.
		bestCost = math.Max(bestCost, algo.LayoutCost(s.Coll, "ring", p.lay, bytes, lc))
	}
	for _, name := range algo.LayoutNames(s.Coll) {
		a, ok := p.layoutAlgo(s.Coll, name)
		if !ok || !a.Supports(s) {
			continue
		}
		if c := algo.LayoutCost(s.Coll, name, p.lay, bytes, lc); c < bestCost {
			best, bestCost = a, c
		}
	}
	return best
}

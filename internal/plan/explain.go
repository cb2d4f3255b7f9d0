package plan

import (
	"fmt"
	"math"
	"strings"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// A Candidate is one algorithm's predicted cost for a call.
type Candidate struct {
	Name   string
	Layout bool       // a host-layout algorithm, costed per link class (Terms unknown)
	Time   float64    // seconds; +Inf when the algorithm cannot serve the call
	Terms  [4]float64 // the α (latency), β (bytes sent), γ (bytes reduced) and δ (bytes copied) parts of Time
}

// An Explanation says which algorithm the planner picks for a call, and why.
type Explanation struct {
	Coll       sched.Coll
	Candidates []Candidate // the flat algorithms in registry order, then the layout's
	Pick       string
	// Forced is set when an override (HCOMM_ALGO) chose the pick;
	// Override names an override that could not serve the call.
	Forced   bool
	Override string
	RunnerUp string // the cheapest other candidate ("" if none)
	// Why names the terms in which the pick beat the runner-up, largest
	// first ("β -12.3 µs, α +0.4 µs"), when both are flat algorithms.
	Why string
}

// Terms returns the predicted time of a for s and its α, β, γ and δ parts:
// the model is linear in each rate, so a part is the cost with only that
// rate set, and the parts add up to the total.
func (m Model) Terms(a algo.Algorithm, s sched.Spec, elemSize int) (total float64, terms [4]float64) {
	for i := range terms {
		only := Model{Chunk: m.Chunk}
		switch i {
		case 0:
			only.Alpha = m.Alpha
		case 1:
			only.Beta = m.Beta
		case 2:
			only.Gamma = m.Gamma
		default:
			only.Delta = m.Delta
		}
		terms[i] = only.SpecCost(a, s, elemSize)
	}
	return m.SpecCost(a, s, elemSize), terms
}

// Explain prices every candidate for s as Choose does and says which one
// Choose picks and why.
func (p *Planner) Explain(s sched.Spec, elemSize int) (Explanation, error) {
	e := Explanation{Coll: s.Coll}
	pick, err := p.Choose(s, elemSize)
	if err != nil {
		return e, err
	}
	e.Pick = pick.Name
	if name, ok := p.overrides[s.Coll]; ok {
		if name == pick.Name {
			e.Forced = true
		} else {
			e.Override = name
		}
	}
	for _, a := range algo.For(s.Coll) {
		c := Candidate{Name: a.Name, Time: math.Inf(1)}
		if a.Supports(s) {
			c.Time, c.Terms = p.model.Terms(a, s, elemSize)
		}
		e.Candidates = append(e.Candidates, c)
	}
	if p.hosts > 1 && s.Coll != sched.AllToAll {
		lc := algo.LinkCosts{Intra: algo.Link{Alpha: MemoryModel.Alpha, Beta: MemoryModel.Beta},
			Inter: algo.Link{Alpha: p.model.Alpha, Beta: p.model.Beta}, Gamma: p.model.Gamma}
		bytes, _ := callBytes(s, elemSize)
		for _, name := range algo.LayoutNames(s.Coll) {
			a, ok := p.layoutAlgo(s.Coll, name)
			c := Candidate{Name: name, Layout: true, Time: math.Inf(1)}
			if ok && a.Supports(s) {
				c.Time = algo.LayoutCost(s.Coll, name, p.lay, bytes, lc)
			}
			e.Candidates = append(e.Candidates, c)
		}
	}
	var pc, ru *Candidate
	for i := range e.Candidates {
		c := &e.Candidates[i]
		if c.Name == e.Pick && pc == nil {
			pc = c
		}
	}
	for i := range e.Candidates {
		c := &e.Candidates[i]
		if c != pc && !math.IsInf(c.Time, 1) && (ru == nil || c.Time < ru.Time) {
			ru = c
		}
	}
	if ru != nil {
		e.RunnerUp = ru.Name
		if pc != nil && !pc.Layout && !ru.Layout {
			e.Why = Why(pc.Terms[0]-ru.Terms[0], pc.Terms[1]-ru.Terms[1], pc.Terms[2]-ru.Terms[2], pc.Terms[3]-ru.Terms[3])
		}
	}
	return e, nil
}

// Reason is the explanation in one line.
func (e Explanation) Reason() string {
	switch {
	case e.Forced:
		return e.Pick + ": forced (HCOMM_ALGO / Config.Algo)"
	case e.RunnerUp == "":
		return e.Pick + ": the only algorithm that serves this call"
	}
	s := e.Pick + ": cheapest under the cost model"
	if e.Override != "" {
		s = e.Pick + ": the forced " + e.Override + " cannot serve this call; cheapest under the cost model"
	}
	s += " over " + e.RunnerUp
	if e.Why != "" {
		s += " (" + e.Why + ")"
	}
	return s
}

// String is the explanation as a small table: each candidate's predicted
// time and terms, then the reason.
func (e Explanation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %12s %12s %12s %12s %12s\n", "algorithm", "µs", "α µs", "β µs", "γ µs", "δ µs")
	for _, c := range e.Candidates {
		name := c.Name
		if c.Layout {
			name += "*"
		}
		if c.Name == e.Pick {
			name = "> " + name
		}
		if math.IsInf(c.Time, 1) {
			fmt.Fprintf(&b, "%-10s %12s\n", name, "-")
			continue
		}
		if c.Layout {
			fmt.Fprintf(&b, "%-10s %12.4g %12s %12s %12s %12s\n", name, c.Time*1e6, "", "", "", "")
			continue
		}
		fmt.Fprintf(&b, "%-10s %12.4g %12.4g %12.4g %12.4g %12.4g\n", name, c.Time*1e6,
			c.Terms[0]*1e6, c.Terms[1]*1e6, c.Terms[2]*1e6, c.Terms[3]*1e6)
	}
	b.WriteString(e.Reason())
	return b.String()
}

// Why names the terms (differences in seconds of the α, β, γ and δ parts)
// in which one algorithm beat another, largest first.
func Why(da, db, dg, dd float64) string {
	type term struct {
		name string
		d    float64
	}
	ts := []term{{"α", da}, {"β", db}, {"γ", dg}, {"δ", dd}}
	for i := range ts {
		for j := i + 1; j < len(ts); j++ {
			if math.Abs(ts[j].d) > math.Abs(ts[i].d) {
				ts[i], ts[j] = ts[j], ts[i]
			}
		}
	}
	var parts []string
	for _, t := range ts {
		if math.Abs(t.d) < 5e-10 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %+.3g µs", t.name, t.d*1e6))
	}
	if len(parts) == 0 {
		return "equal cost"
	}
	return strings.Join(parts, ", ")
}

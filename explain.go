package hcomm

import (
	"math"
	"strconv"
	"time"

	"github.com/hcomm-go/hcomm/internal/argcheck"
	"github.com/hcomm-go/hcomm/internal/callpath"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// A PlanExplanation says which algorithm a communicator's planner picks
// for a collective and why: every candidate's predicted time under the
// communicator's cost model, the pick, and the terms that decided it
// against the runner-up. It is what `hcomm plan` prints, for a live
// communicator (its size, model, host layout and HCOMM_ALGO overrides).
type PlanExplanation struct {
	Op         string // "AllReduce", …
	DType      DType
	Count      int    // elements per rank, as passed to ExplainPlan
	Algo       string // the pick: what the collective would run
	Forced     bool   // chosen by HCOMM_ALGO / Config.Algo
	RunnerUp   string // the cheapest other candidate ("" if none); for "shm-slots", the planner's pick
	Reason     string // the explanation in one line
	Candidates []PlanCandidate

	table string
}

// A PlanCandidate is one algorithm's predicted cost.
type PlanCandidate struct {
	Algo string
	// Supported is false when the algorithm cannot serve the call (its
	// times are then zero).
	Supported bool
	// Layout marks a host-aware algorithm, costed per link class: its
	// Time has no breakdown.
	Layout bool
	Time   time.Duration
	// The parts of Time (they add up to it): latency (α, per message),
	// bandwidth (β, bytes sent), reduction (γ, bytes reduced) and copies
	// (δ, bytes copied within the rank).
	Latency, Bandwidth, Reduction, Copy time.Duration
}

// String is the explanation as a table, one candidate a line (the pick
// marked with ">"), and the reason.
func (e PlanExplanation) String() string {
	return e.Op + " of " + strconv.Itoa(e.Count) + " " + e.DType.String() + ":\n" + e.table
}

// ExplainPlan returns what the planner picks for collective op ("AllReduce",
// "Broadcast", … as OpEvent names them; case does not matter) on count
// elements of dt per rank (a rank's block for AllGather, ReduceScatter,
// Gather and Scatter; per peer for AllToAll), root 0, and why. It sends
// nothing; every rank computes the same answer. Small collectives of a
// communicator whose ranks share a host run on the shared segment's slots
// without the planner (unless HCOMM_ALGO forces an algorithm): Algo is
// then "shm-slots", RunnerUp is the planner's pick (what a larger call, or
// the call with the slot path off, would run), the Reason says both, and
// the Candidates are the planner's.
func (c *Comm) ExplainPlan(op string, dt DType, count int) (PlanExplanation, error) {
	coll, ok := sched.CollNamed(op)
	if !ok || count < 0 || dt.Size() == 0 {
		return PlanExplanation{}, invalid("ExplainPlan(%q, %v, %d): want a collective's name, a type and a count ≥ 0", op, dt, count)
	}
	if coll == sched.Barrier {
		count = 0
	}
	e, err := c.path.Pl.Explain(sched.Uniform(coll, c.size, count, 0, false), dt.Size())
	if err != nil {
		return PlanExplanation{}, invalid("%v", err)
	}
	x := PlanExplanation{Op: coll.String(), DType: dt, Count: count, Algo: e.Pick, Forced: e.Forced,
		RunnerUp: e.RunnerUp, Reason: e.Reason(), table: e.String()}
	for _, k := range e.Candidates {
		pc := PlanCandidate{Algo: k.Name, Layout: k.Layout, Supported: !math.IsInf(k.Time, 1)}
		if pc.Supported {
			pc.Time = seconds(k.Time)
			pc.Latency, pc.Bandwidth, pc.Reduction, pc.Copy = seconds(k.Terms[0]), seconds(k.Terms[1]), seconds(k.Terms[2]), seconds(k.Terms[3])
		}
		x.Candidates = append(x.Candidates, pc)
	}
	if k := (call{Coll: coll, Call: argcheck.Call{Count: count, DT: dt.internal()}}); c.path.GroupFits(&k) {
		// The call runs without a schedule (group.go); the planner's
		// pick is what a larger call would run.
		x.Reason = "every rank on this host and a small contribution: a group call through slots in the shared segment, no schedule; the planner's pick otherwise: " +
			x.Algo + " (" + x.Reason + ")"
		x.Algo, x.Forced, x.RunnerUp = callpath.GroupAlgo, false, x.Algo
		x.table += "\n" + callpath.GroupAlgo + ": " + x.Reason
	}
	return x, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

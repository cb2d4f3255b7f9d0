package callpath

import (
	"context"

	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/transport"
)

// Small collectives of a communicator whose ranks all share one host run
// (every collective but the V forms, up to 1 KiB per rank's contribution)
// as group calls of the shared-memory transport (transport.Group): every
// rank publishes its contribution and fingerprint in its own slot of the
// segment and reads the others', in one step, with no program, planner or
// executor. Which calls qualify depends only on what every rank knows
// alike (the collective, the element count and size, the communicator's
// transports, HCOMM_ALGO and HCOMM_SHM_SLOTS), so all ranks take the same
// path. A collective forced to an algorithm by HCOMM_ALGO keeps its
// schedule; HCOMM_SHM_SLOTS=0 keeps them all.
//
// The call's deadline and stall check are armed only if a wait outlasts
// the transport's polling (groupArm), so a call that completes at once
// pays for neither.

// groupColls are the collectives with a group form.
var groupColls = [...]sched.Coll{sched.Barrier, sched.AllReduce, sched.Reduce, sched.Broadcast, sched.AllGather,
	sched.Gather, sched.ReduceScatter, sched.Scatter, sched.AllToAll}

// GroupAlgo names the group path where an algorithm is reported.
const GroupAlgo = "shm-slots"

// group is a communicator's group-call setup.
type group struct {
	g     transport.Group          // nil: no group calls
	max   int                      // bytes
	colls [sched.Barrier + 1]uint8 // per collective: 0 no group form, else the blocks a contribution holds
	slot  int                      // the running call's flight-recorder slot; -1 until it waits
	end   func()                   // ends the running call's deadline; nil: its deadline and stall check are not armed
	arm   groupArm                 // p, as the transport.Deferred of its calls
}

// InitGroup finds out whether t runs group calls for every rank.
func (p *Path) InitGroup(t transport.Transport) {
	var g transport.Group
	switch x := t.(type) {
	case interface{ Group() transport.Group }:
		g = x.Group()
	case transport.Group:
		g = x
	}
	// colls counts a contribution's blocks, one per rank, in a uint8.
	if g == nil || p.Set.NoSlots || p.Size < 2 || p.Size > 255 || g.GroupMax() <= 0 {
		return
	}
	p.grp.g, p.grp.max = g, g.GroupMax()
	for _, k := range groupColls {
		if _, forced := p.Set.Overrides[k]; !forced {
			p.grp.colls[k] = 1
			if k == sched.ReduceScatter || k == sched.Scatter || k == sched.AllToAll {
				// A rank contributes a block for every rank.
				p.grp.colls[k] = uint8(p.Size)
			}
		}
	}
	p.grp.arm = groupArm{p}
	p.Rec.SetClock(p.Clock)
}

// GroupFits reports whether k runs as a group call: its collective has a
// group form, not forced to an algorithm, and a rank's contribution fits
// a slot.
func (p *Path) GroupFits(k *Call) bool {
	if p.grp.g == nil || k.Spec != nil || int(k.Coll) >= len(p.grp.colls) {
		return false
	}
	blocks := int(p.grp.colls[k.Coll])
	if blocks == 0 {
		return false
	}
	// count <= max first, so that the product cannot overflow.
	return k.Count <= p.grp.max && k.Count*k.DT.Size()*blocks <= p.grp.max
}

// groupArm arms a group call's deadline and stall check when the transport
// asks for its context. It runs under p.Mu, on the caller's goroutine.
type groupArm struct{ p *Path }

func (a groupArm) Arm() context.Context {
	p := a.p
	if p.Cur.Start.IsZero() {
		// Unobserved calls start without reading the clock; polling took
		// microseconds.
		p.Cur.Start = p.Clock.Now()
	}
	if p.grp.slot < 0 {
		// The flight recorder learns of the call now that it waits.
		p.grp.slot = p.Rec.Begin(p.Cur.Name, p.Cur.FP, p.Cur.Start)
	}
	ctx, end := p.boundCtx(p.Cur.Parent, p.Cur.Start)
	p.Cur.Ctx = ctx
	p.grp.end = end
	p.Stall.Begin(p.Cur.Seq, p.Cur.Start)
	return ctx
}

// groupDisarm ends the deadline groupArm armed, once the call's failure,
// if any, has been reported (the report reads the deadline's state).
func (p *Path) groupDisarm() {
	p.grp.end()
	p.grp.end = nil
}

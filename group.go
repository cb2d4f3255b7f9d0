package hcomm

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

// groupAlgo names the group path where an algorithm is reported.
const groupAlgo = "shm-slots"

// groupState is a communicator's group-call setup.
type groupState struct {
	g     transport.Group          // nil: no group calls
	max   int                      // bytes
	colls [sched.Barrier + 1]uint8 // per collective: 0 no group form, else the blocks a contribution holds
	slot  int                      // the running call's flight-recorder slot; -1 until it waits
	end   func()                   // ends the running call's deadline; nil: its deadline and stall check are not armed
	arm   groupArm                 // c, as the transport.Deferred of its calls
}

// initGroup finds out whether t runs group calls for every rank.
func (c *Comm) initGroup(t transport.Transport) {
	var g transport.Group
	switch x := t.(type) {
	case interface{ Group() transport.Group }:
		g = x.Group()
	case transport.Group:
		g = x
	}
	// colls counts a contribution's blocks, one per rank, in a uint8.
	if g == nil || c.set.noSlots || c.size < 2 || c.size > 255 || g.GroupMax() <= 0 {
		return
	}
	c.grp.g, c.grp.max = g, g.GroupMax()
	for _, k := range groupColls {
		if _, forced := c.set.overrides[k]; !forced {
			c.grp.colls[k] = 1
			if k == sched.ReduceScatter || k == sched.Scatter || k == sched.AllToAll {
				// A rank contributes a block for every rank.
				c.grp.colls[k] = uint8(c.size)
			}
		}
	}
	c.grp.arm = groupArm{c}
	c.rec.SetClock(c.clock)
}

// groupFits reports whether k runs as a group call: its collective has a
// group form, not forced to an algorithm, and a rank's contribution fits
// a slot.
func (c *Comm) groupFits(k *call) bool {
	if c.grp.g == nil || k.Spec != nil || int(k.coll) >= len(c.grp.colls) {
		return false
	}
	blocks := int(c.grp.colls[k.coll])
	if blocks == 0 {
		return false
	}
	// count <= max first, so that the product cannot overflow.
	return k.Count <= c.grp.max && k.Count*k.DT.Size()*blocks <= c.grp.max
}

// groupArm arms a group call's deadline and stall check when the transport
// asks for its context. It runs under c.mu, on the caller's goroutine.
type groupArm struct{ c *Comm }

func (a groupArm) Arm() context.Context {
	c := a.c
	if c.cur.start.IsZero() {
		// Unobserved calls start without reading the clock; polling took
		// microseconds.
		c.cur.start = c.clock.Now()
	}
	if c.grp.slot < 0 {
		// The flight recorder learns of the call now that it waits.
		c.grp.slot = c.rec.Begin(c.cur.name, c.cur.fp, c.cur.start)
	}
	ctx, end := c.boundCtx(c.cur.parent, c.cur.start)
	c.cur.ctx = ctx
	c.grp.end = end
	c.stall.Begin(c.cur.seq, c.cur.start)
	return ctx
}

// groupDisarm ends the deadline groupArm armed, once the call's failure,
// if any, has been reported (the report reads the deadline's state).
func (c *Comm) groupDisarm() {
	c.grp.end()
	c.grp.end = nil
}

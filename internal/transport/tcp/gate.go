package tcp

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"time"
)

// aLongTimeAgo is a deadline in the past: setting it on a connection makes
// blocked and later I/O on it fail at once.
var aLongTimeAgo = time.Unix(1, 0)

// A gate maps the context of the call in progress in one direction (sending
// or receiving) on one peer to deadlines on that peer's connections: the
// context's end, at its deadline or by cancellation, becomes an immediate
// socket deadline (fire, a hook on the context). The sockets do not carry
// the context's deadline themselves: each call of a communicator has a
// deadline of its own, and copying it would reset the sockets' timers for
// every message. Killing the gate interrupts the call in progress and turns
// later calls away.
//
// The gate keeps its cancellation hook registered on the last context it saw
// and reuses it while calls keep coming with the same context, so a run of
// messages under one context costs no allocation. It sets a socket deadline
// only when it changes.
type gate struct {
	mu    sync.Mutex
	write bool    // set write deadlines (else read deadlines)
	conns []*conn // the peer's connections, once all are up
	armed []time.Time
	dead  bool
	// The lead stream's connection (lead.go), which a move puts
	// elsewhere than at its position, and its deadline.
	leadc     *conn
	leadArmed time.Time

	active   context.Context // context of the call in progress, nil between calls
	deadline time.Time       // active's deadline, zero if none

	watched context.Context // context the hook is registered on
	unwatch func() bool     // removes the hook
	oneShot bool            // the hook belongs to the active call only

	// The receive's wait for its lead (receive gate only): it follows
	// the lead's read deadline (setLeadDeadline).
	lw leadWait
}

// setConns gives the gate the connections it governs.
func (g *gate) setConns(conns []*conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conns = slices.Clone(conns)
	g.armed = make([]time.Time, len(conns))
	if len(conns) > 0 {
		g.leadc = conns[0]
	}
	if g.dead {
		g.setAll(aLongTimeAgo)
	}
}

// enter starts a call under ctx and arms the first connection. It reports
// false if the gate is dead.
func (g *gate) enter(ctx context.Context) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead {
		return false
	}
	if ctx.Done() != nil && !g.watching(ctx) {
		if g.unwatch != nil {
			g.unwatch()
		}
		g.unwatch = context.AfterFunc(ctx, g.fire)
		// Only contexts of comparable types can be recognised when they
		// come back; others get a hook per call.
		g.oneShot = !reflect.TypeOf(ctx).Comparable()
		g.watched = nil
		if !g.oneShot {
			g.watched = ctx
		}
	}
	g.active = ctx
	// A context that can end is watched: fire interrupts the call when it
	// does (see gate). Only one that cannot end would need its deadline on
	// the sockets, and such a context has none.
	g.deadline = time.Time{}
	if ctx.Done() == nil {
		g.deadline, _ = ctx.Deadline()
	}
	g.armLocked(1)
	return true
}

// watching reports whether the hook is registered on ctx. g.watched only
// ever holds a context of a comparable type, so the comparison cannot panic.
func (g *gate) watching(ctx context.Context) bool {
	return g.watched != nil && g.watched == ctx
}

// arm sets the active call's deadline on the first n connections.
func (g *gate) arm(n int) {
	g.mu.Lock()
	g.armLocked(n)
	g.mu.Unlock()
}

func (g *gate) armLocked(n int) {
	if g.active == nil || g.dead {
		return
	}
	d := g.deadline
	if g.active.Err() != nil {
		d = aLongTimeAgo
	}
	for i := 0; i < n && i < len(g.conns); i++ {
		if !g.armed[i].Equal(d) {
			g.setDeadline(g.conns[i], d)
			g.armed[i] = d
		}
	}
	if g.leadc != nil && !g.leadArmed.Equal(d) {
		g.setLeadDeadline(d)
		g.leadArmed = d
	}
}

// setLead makes c the lead: the connection armed for every call.
func (g *gate) setLead(c *conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leadc = c
	d := g.leadArmed
	if g.dead {
		d = aLongTimeAgo
	}
	g.setLeadDeadline(d)
}

// pokeLead interrupts the I/O in progress on the lead, as poke does.
func (g *gate) pokeLead() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.leadc != nil {
		g.setLeadDeadline(aLongTimeAgo)
	}
}

// restoreLead undoes pokeLead, as restore does.
func (g *gate) restoreLead() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.leadc != nil {
		d := g.leadArmed
		if g.dead {
			d = aLongTimeAgo
		}
		g.setLeadDeadline(d)
	}
}

// exit ends the call in progress.
func (g *gate) exit() {
	g.mu.Lock()
	g.active = nil
	if g.oneShot && g.unwatch != nil {
		g.unwatch()
		g.unwatch = nil
		g.oneShot = false
	}
	g.mu.Unlock()
}

// ifIdle calls f if no call is in progress, with none entering meanwhile.
func (g *gate) ifIdle(f func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active == nil {
		f()
	}
}

// fire runs when a watched context is done. Hooks of earlier calls may
// still fire, so it interrupts the call in progress only if that call's own
// context is done.
func (g *gate) fire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.active != nil && g.active.Err() != nil {
		g.setAll(aLongTimeAgo)
	}
}

// kill interrupts the call in progress and turns later calls away.
func (g *gate) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.dead {
		return
	}
	g.dead = true
	g.setAll(aLongTimeAgo)
	if g.unwatch != nil {
		g.unwatch()
		g.unwatch = nil
	}
	g.watched = nil
}

func (g *gate) setAll(d time.Time) {
	for i, c := range g.conns {
		g.setDeadline(c, d)
		g.armed[i] = d
	}
	if g.leadc != nil {
		g.setLeadDeadline(d)
		g.leadArmed = d
	}
}

// setLeadDeadline sets d on the lead and on the receive's wait for it.
func (g *gate) setLeadDeadline(d time.Time) {
	g.setDeadline(g.leadc, d)
	if !g.write {
		g.lw.setDeadline(d)
	}
}

func (g *gate) setDeadline(c *conn, d time.Time) {
	if g.write {
		c.nc.SetWriteDeadline(d)
	} else {
		c.nc.SetReadDeadline(d)
	}
}

// poke interrupts the I/O in progress on connection i without changing
// the deadline the gate means it to have: restore puts that back.
func (g *gate) poke(i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i < len(g.conns) {
		g.setDeadline(g.conns[i], aLongTimeAgo)
	}
}

// restore gives connection i back the deadline the gate means it to have,
// after poke.
func (g *gate) restore(i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if i < len(g.conns) {
		d := g.armed[i]
		if g.dead {
			d = aLongTimeAgo
		}
		g.setDeadline(g.conns[i], d)
	}
}

// replace puts c in place of connection i (a retired path's connection
// dialed again, see redial.go), with the deadline the gate means
// connection i to have.
func (g *gate) replace(i int, c *conn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.conns[i] = c
	d := g.armed[i]
	if g.dead {
		d = aLongTimeAgo
	}
	g.setDeadline(c, d)
}

// waitLead waits, for the receive in progress, until the lead c has
// something to read (nil), or until woken: by a past deadline (pokeLead,
// wakeWatch, a dead gate or the call's context) or by closeWait. It
// reports false, having waited for nothing, when the wait is not
// available here.
func (g *gate) waitLead(c *conn) (bool, error) {
	g.mu.Lock()
	if g.write || !g.lw.prepare(c) {
		g.mu.Unlock()
		return false, nil
	}
	raw, fn := g.lw.raw, g.lw.fn
	g.mu.Unlock()
	return true, g.lw.wait(raw, fn)
}

// wakeWatch wakes the receive's watch of the lead while stripes come
// (peer.watchRepairs). If the receive said it waits in waitLead, waking that
// wait is enough, and allocates nothing; otherwise the lead's read is
// woken too, as pokeLead does.
func (g *gate) wakeWatch(waiting bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if waiting {
		g.lw.setDeadline(aLongTimeAgo)
	} else if g.leadc != nil {
		g.setLeadDeadline(aLongTimeAgo)
	}
}

// closeWait ends waitLead for good, waking a wait in progress.
func (g *gate) closeWait() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lw.close()
}

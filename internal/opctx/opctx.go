// Package opctx is the per-call context of a communicator: one reusable
// context.Context that bounds each operation by the communicator's timeout
// and the caller's ctx without allocating.
package opctx

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hcomm-go/hcomm/internal/clock"
)

// Ctx bounds one operation at a time by the communicator's timeout
// without allocating: the communicator keeps one, re-arms its timer for
// every call, and keeps its done channel until the call's context actually
// ends. A parent that cannot be cancelled (context.Background) costs
// nothing more; a cancellable parent is watched for the length of the call
// through context.AfterFunc, which allocates a little.
//
// Because the object is reused, a hook that fires for one call must finish
// before the next call re-arms the context (the context package reads Err
// from inside such hooks and requires it to be non-nil): Begin waits for
// hooks in flight.
//
// It implements the AfterFunc method that context.AfterFunc looks for, so
// that transports can hook it without a goroutine.
type Ctx struct {
	mu       sync.Mutex
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	err      error
	timer    clock.Timer
	armed    bool // the timer will fire (at or before the current deadline)
	stopped  bool // Stop: the timer is not armed again
	ref      *timerRef
	hooks    []*hook
	firing   sync.WaitGroup // hooks running for an ended call

	unwatch  func() bool // unhooks the current call's parent
	onParent func()      // o.parentDone, made once

	// Clock is the time source; nil means the system's. Tests set a
	// clock.Fake to fire deadlines without waiting.
	Clock clock.Clock
}

func (o *Ctx) clock() clock.Clock { return clock.Or(o.Clock) }

type hook struct{ f func() }

// Begin arms the context for a call, started at now, of at most d under
// parent.
func (o *Ctx) Begin(parent context.Context, now time.Time, d time.Duration) {
	o.firing.Wait()
	o.mu.Lock()
	o.parent = parent
	o.deadline = now.Add(d)
	if pd, ok := parent.Deadline(); ok && pd.Before(o.deadline) {
		o.deadline = pd
	}
	if o.done == nil || o.err != nil {
		o.done = make(chan struct{})
		o.err = nil
	}
	// The timer is armed lazily: one that is still armed fires at an
	// earlier call's deadline, before this one's, and re-arms itself from
	// there; so most calls touch no timer at all.
	if !o.armed && !o.stopped {
		o.armed = true
		if o.timer == nil {
			o.ref = &timerRef{}
			o.ref.o.Store(o)
			o.timer = o.clock().AfterFunc(o.deadline.Sub(o.clock().Now()), o.ref.fire)
		} else {
			o.timer.Reset(o.deadline.Sub(o.clock().Now()))
		}
	}
	o.mu.Unlock()
	if parent.Done() != nil {
		if o.onParent == nil {
			o.onParent = o.parentDone
		}
		o.unwatch = context.AfterFunc(parent, o.onParent)
	}
	if err := parent.Err(); err != nil {
		o.finish(parent, err)
	}
}

// parentDone runs when a watched parent ends.
func (o *Ctx) parentDone() {
	o.mu.Lock()
	p := o.parent
	o.mu.Unlock()
	if p != nil && p.Err() != nil {
		o.finish(p, p.Err())
	}
}

// finish ends the current call's context with err, if parent is still the
// current call's parent.
func (o *Ctx) finish(parent context.Context, err error) {
	o.mu.Lock()
	if o.err != nil || o.parent != parent {
		o.mu.Unlock()
		return
	}
	o.err = err
	close(o.done)
	hooks := append([]*hook(nil), o.hooks...)
	o.firing.Add(1)
	o.mu.Unlock()
	defer o.firing.Done()
	for _, h := range hooks {
		h.f()
	}
}

// End ends the call. The timer stays armed; when it fires between calls
// it finds no call and stops.
func (o *Ctx) End() {
	if o.unwatch != nil {
		o.unwatch()
		o.unwatch = nil
	}
	o.mu.Lock()
	o.parent = nil
	o.mu.Unlock()
}

// Stop stops the timer for good (the communicator's Close): an armed
// timer holds the context, and whatever holds the context, until the
// deadline of the last call, the communicator's timeout after it began.
// Calls that begin after Stop, or run on, are bounded by their parent
// alone.
func (o *Ctx) Stop() {
	o.mu.Lock()
	o.stopped = true
	if o.timer != nil {
		o.timer.Stop()
		o.ref.o.Store(nil)
	}
	o.armed = false
	o.mu.Unlock()
}

// timerRef is the timer's hold on its context. A stopped timer can stay
// in the runtime's timer heap, with its function, until its time would
// have come; its function reaches the context only through the pointer
// Stop clears, so that a stopped timer does not keep the context (and the
// communicator around it) until the deadline.
type timerRef struct{ o atomic.Pointer[Ctx] }

func (r *timerRef) fire() {
	if o := r.o.Load(); o != nil {
		o.fire()
	}
}

// fire runs when the timer expires: it ends the current call if its
// deadline has passed, re-arms for the current call's deadline if not, and
// stays disarmed between calls.
func (o *Ctx) fire() {
	o.mu.Lock()
	p := o.parent
	if p == nil || o.stopped {
		o.armed = false
		o.mu.Unlock()
		return
	}
	if left := o.deadline.Sub(o.clock().Now()); left > 0 {
		o.timer.Reset(left)
		o.mu.Unlock()
		return
	}
	o.armed = false
	o.mu.Unlock()
	o.finish(p, context.DeadlineExceeded)
}

func (o *Ctx) Deadline() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deadline, true
}

func (o *Ctx) Done() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done
}

func (o *Ctx) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *Ctx) Value(key any) any {
	o.mu.Lock()
	p := o.parent
	o.mu.Unlock()
	if p == nil {
		return nil
	}
	return p.Value(key)
}

// AfterFunc arranges for f to run when the context's current deadline
// fires, and returns a function that cancels that; context.AfterFunc uses
// it. Hooks outlive calls: a hook registered during one call also fires for
// a later call's deadline, as it would for a context reused across calls.
func (o *Ctx) AfterFunc(f func()) func() bool {
	h := &hook{f: f}
	o.mu.Lock()
	if o.err != nil {
		// Ended already: run f at once, but not here (the context package
		// calls this with its own lock held, and f takes it).
		o.firing.Add(1)
		o.mu.Unlock()
		go func() {
			defer o.firing.Done()
			f()
		}()
		return func() bool { return false }
	}
	o.hooks = append(o.hooks, h)
	o.mu.Unlock()
	return func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		for i, x := range o.hooks {
			if x == h {
				o.hooks = append(o.hooks[:i], o.hooks[i+1:]...)
				return true
			}
		}
		return false
	}
}

// TimeoutFired reports whether timeout (the communicator's), not the
// caller's parent context, ended a call that ran under ctx. The call's
// context fires at the earlier of the two deadlines, possibly before
// parent has noticed its own, so the deadlines are compared rather than
// parent's Err.
func TimeoutFired(timeout time.Duration, parent, ctx context.Context) bool {
	if timeout <= 0 || parent.Err() != nil {
		return false
	}
	pd, ok := parent.Deadline()
	if !ok {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && d.Before(pd)
}

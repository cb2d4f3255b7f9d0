package hcomm

import (
	"context"
	"sync"
	"time"
)

// opCtx bounds one operation at a time by the communicator's timeout
// without allocating: the communicator keeps one, re-arms its timer for
// every call, and keeps its done channel until a deadline actually fires.
// It serves only parents that cannot be cancelled (Done() == nil, as
// context.Background()); for others the communicator derives an ordinary
// context.
//
// It implements the AfterFunc method that context.AfterFunc looks for, so
// that transports can hook it without a goroutine.
type opCtx struct {
	mu       sync.Mutex
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	err      error
	timer    *time.Timer
	hooks    []*hook
}

type hook struct{ f func() }

// begin arms the context for a call of at most d under parent.
func (o *opCtx) begin(parent context.Context, d time.Duration) {
	o.mu.Lock()
	o.parent = parent
	o.deadline = time.Now().Add(d)
	if o.done == nil || o.err != nil {
		o.done = make(chan struct{})
		o.err = nil
	}
	o.mu.Unlock()
	if o.timer == nil {
		o.timer = time.AfterFunc(d, o.fire)
	} else {
		o.timer.Reset(d)
	}
}

// end disarms the context after the call.
func (o *opCtx) end() {
	o.timer.Stop()
	o.mu.Lock()
	o.parent = nil
	o.mu.Unlock()
}

// fire closes done if the armed deadline has passed (a timer of an earlier
// call firing late finds a later deadline and does nothing).
func (o *opCtx) fire() {
	o.mu.Lock()
	if o.err != nil || time.Now().Before(o.deadline) {
		o.mu.Unlock()
		return
	}
	o.err = context.DeadlineExceeded
	close(o.done)
	hooks := append([]*hook(nil), o.hooks...)
	o.mu.Unlock()
	for _, h := range hooks {
		h.f()
	}
}

func (o *opCtx) Deadline() (time.Time, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.deadline, true
}

func (o *opCtx) Done() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done
}

func (o *opCtx) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

func (o *opCtx) Value(key any) any {
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
func (o *opCtx) AfterFunc(f func()) func() bool {
	h := &hook{f: f}
	o.mu.Lock()
	if o.err != nil {
		o.mu.Unlock()
		go f()
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

// boundCtx returns the context an operation runs under: parent bounded by
// the communicator's timeout, and a function to call when the operation
// ends. It allocates nothing when parent cannot be cancelled or already
// ends before the timeout would.
func (c *Comm) boundCtx(parent context.Context) (context.Context, func()) {
	d := c.set.timeout
	if d <= 0 {
		return parent, func() {}
	}
	if parent.Done() == nil {
		c.octx.begin(parent, d)
		return &c.octx, c.octxEnd
	}
	if dl, ok := parent.Deadline(); ok && time.Until(dl) <= d {
		return parent, func() {}
	}
	return context.WithTimeout(parent, d)
}

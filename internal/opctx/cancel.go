package opctx

import (
	"context"
	"sync"
	"time"
)

// Cancel is a reusable context that can only be cancelled: no deadline, no
// values. A stream's work runs with one; it lives in the pooled Stream, so
// creating a stream allocates nothing, and its Done channel is made only if
// someone asks for it. Reset makes it uncancelled again for reuse.
type Cancel struct {
	mu     sync.Mutex
	done   chan struct{}
	err    error
	afters []afterFunc
	next   uint64
	// firing counts hooks still running for a cancellation; Reset waits
	// for them, since the context package reads Err inside its hooks and
	// a reused context must not answer nil to them.
	firing sync.WaitGroup
}

type afterFunc struct {
	id uint64
	f  func()
}

// Reset makes the context uncancelled again, once the hooks of its last
// cancellation have finished.
func (c *Cancel) Reset() {
	c.firing.Wait()
	c.mu.Lock()
	c.done, c.err = nil, nil
	clear(c.afters)
	c.afters = c.afters[:0]
	c.mu.Unlock()
}

// Deadline reports no deadline.
func (c *Cancel) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done returns a channel closed when the stream fails.
func (c *Cancel) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

// Err returns context.Canceled once the stream has failed.
func (c *Cancel) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Value returns nil: a stream's context carries no values.
func (c *Cancel) Value(any) any { return nil }

// AfterFunc runs f in its own goroutine once the context is cancelled; the
// context package uses it to link derived contexts without a goroutine
// each.
func (c *Cancel) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		c.firing.Add(1)
		go func() {
			defer c.firing.Done()
			f()
		}()
		return func() bool { return false }
	}
	c.next++
	id := c.next
	c.afters = append(c.afters, afterFunc{id, f})
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, a := range c.afters {
			if a.id == id {
				c.afters = append(c.afters[:i], c.afters[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Cancel cancels the context: Err becomes context.Canceled, Done closes
// and the AfterFunc hooks run, each on its own goroutine.
func (c *Cancel) Cancel() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = context.Canceled
	if c.done != nil {
		close(c.done)
	}
	for _, a := range c.afters {
		c.firing.Add(1)
		go func() {
			defer c.firing.Done()
			a.f()
		}()
	}
	clear(c.afters)
	c.afters = c.afters[:0]
}

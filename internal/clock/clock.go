// Package clock is the time source of the mechanisms that wait on their
// own (the per-call context, the bucketer's window): the system clock in
// production, a Fake that moves only when told in tests, so that no test
// has to sleep to see a deadline fire.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer made by Clock.AfterFunc.
type Timer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

// System is the system clock.
var System Clock = system{}

type system struct{}

func (system) Now() time.Time { return time.Now() }
func (system) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(d, f)
}

// Or returns c, or System when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return System
	}
	return c
}

// Fake is a Clock whose time moves only by Advance. Timers that come due
// run on the goroutine that calls Advance, in the order of their deadlines.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c      *Fake
	when   time.Time
	f      func()
	active bool
}

// NewFake returns a Fake clock set to an arbitrary fixed time.
func NewFake() *Fake { return &Fake{now: time.Unix(1_000_000, 0)} }

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc makes a timer that runs f when Advance reaches now+d.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, when: c.now.Add(d), f: f, active: true}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.when, t.active = t.c.now.Add(d), true
	return was
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := t.active
	t.active = false
	return was
}

// Advance moves the time on by d and runs the timers that come due (a
// timer its own function re-arms runs again if due again).
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var due *fakeTimer
		for _, t := range c.timers {
			if t.active && !t.when.After(c.now) && (due == nil || t.when.Before(due.when)) {
				due = t
			}
		}
		if due == nil {
			c.mu.Unlock()
			return
		}
		due.active = false
		c.mu.Unlock()
		due.f()
	}
}

// Timers returns how many timers were made, and how many are armed.
func (c *Fake) Timers() (made, armed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if t.active {
			armed++
		}
	}
	return len(c.timers), armed
}

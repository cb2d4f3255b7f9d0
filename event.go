package hcomm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// An Event marks a point in a Stream's work. Stream.Record (or
// Stream.RecordEvent) places it; the record completes when the stream has
// finished everything enqueued before it. Other streams order themselves
// after it with Stream.WaitEvent, goroutines with Synchronize, and two
// completed events time the work between them with Elapsed.
//
// # Recording again
//
// An event can be recorded many times, on one stream or several. Each
// record is numbered, and the event always refers to its most recent
// record at the time of the question:
//
//   - WaitEvent and Synchronize wait for the record that is the most recent
//     one when they are called. A record issued later does not change what
//     an earlier WaitEvent waits for.
//   - Query reports whether the most recent record has completed.
//   - An event that has never been recorded (since NewEvent or Reset) is
//     not complete: Query reports false, and WaitEvent and Synchronize wait
//     for its first record.
//
// This is the reuse hazard to keep in mind: if a producer records an event
// again before a consumer has called WaitEvent, the consumer waits for the
// new record, not the one it meant, and may wait longer than intended (or
// forever, if the new record depends on the consumer). Conversely, a
// consumer that calls WaitEvent on an event recorded for an earlier
// iteration does not wait at all. Call WaitEvent before the producer
// re-records, or use Reset between iterations so that waits refer to the
// next record.
//
// When a record completes on a stream that has failed, the event carries
// the stream's error: streams waiting on it fail with an error wrapping it,
// and Synchronize returns it.
//
// # Lifetime
//
// An *Event is one event for its whole life: events are not pooled, so a
// released event never becomes a later NewEvent's. Release marks the
// event as finished with; recording a released event completes at once
// with ErrClosed. Events are collected like any value once unreferenced;
// a loop that wants no allocation reuses its events with RecordEvent
// rather than calling Record.
type Event struct {
	name string
	id   uint64

	mu        sync.Mutex
	gen       uint64    // records issued, counted over all of the event's lives
	base      uint64    // gen at the last NewEvent or Reset: gen == base means not recorded
	completed uint64    // the highest completed record
	err       error     // the error of the most recently completed record
	at        time.Time // when record number completed completed
	recOn     *Stream   // the stream of the most recent record
	waiters   []*waiter
	refs      int  // pending records and waits
	released  bool // Release was called
}

// waiter is a goroutine (a stream's worker or a Synchronize call) waiting
// for a counter to reach gen.
type waiter struct {
	ch  chan struct{} // capacity 1
	gen uint64
}

var (
	eventIDs atomic.Uint64
	waitPool = freeList[waiter]{max: 1024}
)

// freeList is a bounded list of reusable objects. Unlike a sync.Pool it
// survives garbage collections, so steady-state reuse is deterministic.
type freeList[T any] struct {
	mu    sync.Mutex
	items []*T
	max   int
}

func (f *freeList[T]) get() *T {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.items)
	if n == 0 {
		return nil
	}
	x := f.items[n-1]
	f.items[n-1] = nil
	f.items = f.items[:n-1]
	return x
}

func (f *freeList[T]) put(x *T) {
	f.mu.Lock()
	if len(f.items) < f.max {
		f.items = append(f.items, x)
	}
	f.mu.Unlock()
}

func getWaiter(gen uint64) *waiter {
	w := waitPool.get()
	if w == nil {
		w = &waiter{ch: make(chan struct{}, 1)}
	}
	w.gen = gen
	return w
}

// putWaiter returns w to the pool once nothing can signal it any more.
func putWaiter(w *waiter) {
	select {
	case <-w.ch:
	default:
	}
	waitPool.put(w)
}

// signal wakes w without blocking.
func (w *waiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// NewEvent returns an event that has not been recorded. The name appears
// in error messages; it may be empty.
func NewEvent(name string) *Event {
	return &Event{name: name, id: eventIDs.Add(1)}
}

// Name returns the event's name, or "event#N" for an unnamed event.
func (e *Event) Name() string {
	if e.name != "" {
		return e.name
	}
	return "event#" + strconv.FormatUint(e.id, 10)
}

// String returns the event's name, quoted.
func (e *Event) String() string { return strconv.Quote(e.Name()) }

// target returns the record a wait issued now refers to. e.mu is held.
func (e *Event) target() uint64 {
	if e.gen == e.base {
		return e.gen + 1 // not recorded: the next record
	}
	return e.gen
}

// issue numbers a new record of e on s and returns its number.
func (e *Event) issue(s *Stream) uint64 {
	e.mu.Lock()
	e.gen++
	g := e.gen
	e.recOn = s
	e.refs++
	e.mu.Unlock()
	return g
}

// complete marks record g as done with err at now and wakes whoever waits
// for it.
func (e *Event) complete(g uint64, err error, now time.Time) {
	e.mu.Lock()
	if g > e.completed {
		e.completed, e.err, e.at = g, err, now
		ws := e.waiters[:0]
		for _, w := range e.waiters {
			if w.gen <= g {
				w.signal()
			} else {
				ws = append(ws, w)
			}
		}
		clear(e.waiters[len(ws):])
		e.waiters = ws
	}
	e.unrefLocked()
	e.mu.Unlock()
}

// unref drops a pending wait.
func (e *Event) unref() {
	e.mu.Lock()
	e.unrefLocked()
	e.mu.Unlock()
}

func (e *Event) unrefLocked() {
	e.refs--
}

// removeWaiter unregisters w if it is still registered.
func (e *Event) removeWaiter(w *waiter) {
	for i, x := range e.waiters {
		if x == w {
			last := len(e.waiters) - 1
			e.waiters[i] = e.waiters[last]
			e.waiters[last] = nil
			e.waiters = e.waiters[:last]
			return
		}
	}
}

// Query reports whether the event's most recent record has completed,
// successfully or not. An event never recorded is not complete.
func (e *Event) Query() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gen != e.base && e.completed >= e.gen
}

// Err returns the error the most recently completed record carries (nil
// if it completed without one, or if none has completed).
func (e *Event) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Synchronize blocks until the record that is the event's most recent one
// when Synchronize is called completes (its first record if it has none),
// and returns the error that record carries. It returns early with an error
// when ctx ends.
func (e *Event) Synchronize(ctx context.Context) error {
	e.mu.Lock()
	g := e.target()
	if e.completed >= g {
		err := e.err
		e.mu.Unlock()
		return err
	}
	w := getWaiter(g)
	e.waiters = append(e.waiters, w)
	e.mu.Unlock()
	select {
	case <-w.ch:
		putWaiter(w)
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.err
	case <-ctx.Done():
		e.mu.Lock()
		e.removeWaiter(w)
		e.mu.Unlock()
		putWaiter(w)
		return &StreamError{Stream: e.recName(), Op: "Event.Synchronize", Err: ctxErr(ctx)}
	}
}

// recName names the stream of the event's latest record, for errors.
func (e *Event) recName() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.recOn == nil {
		return ""
	}
	return e.recOn.Name()
}

// ErrNotRecorded reports that Event.Elapsed was asked about an event whose
// most recent record has not completed (or that was never recorded).
var ErrNotRecorded = errors.New("hcomm: event not recorded or not complete")

// Elapsed returns the time from the completion of e's most recent record to
// the completion of end's. Both must be complete (see Query); otherwise it
// returns an error wrapping ErrNotRecorded. The result is negative if end
// completed first.
func (e *Event) Elapsed(end *Event) (time.Duration, error) {
	e.mu.Lock()
	ok, t0 := e.gen != e.base && e.completed >= e.gen, e.at
	e.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNotRecorded, e)
	}
	end.mu.Lock()
	ok, t1 := end.gen != end.base && end.completed >= end.gen, end.at
	end.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("%w: %s", ErrNotRecorded, end)
	}
	return t1.Sub(t0), nil
}

// Reset makes the event unrecorded, as if just created: Query reports
// false until it is recorded again, and WaitEvent and Synchronize called
// after Reset wait for the next record. Waits already issued are not
// affected.
func (e *Event) Reset() {
	e.mu.Lock()
	e.base = e.gen
	e.err = nil
	e.at = time.Time{}
	e.mu.Unlock()
}

func (e *Event) isReleased() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.released
}

// Release marks the event as finished with. Records and waits still
// pending on it complete normally; a later record completes at once with
// ErrClosed. Release is idempotent.
func (e *Event) Release() {
	e.mu.Lock()
	e.released = true
	e.mu.Unlock()
}

// ctxErr is the error for a wait cut short by ctx: it matches ErrTimeout
// and context.DeadlineExceeded when the deadline passed, and
// context.Canceled otherwise.
func ctxErr(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return &timeoutError{}
	}
	return ctx.Err()
}

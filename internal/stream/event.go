package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Event is a point in a stream's work, recorded any number of times; each
// record is numbered, and questions refer to the most recent record at
// the time they are asked (see hcomm.Event). Its zero value is unusable:
// Init it in place.
type Event struct {
	name string
	id   uint64
	auto atomic.Pointer[string] // "event#N", built by the first Name of an unnamed event

	mu        sync.Mutex
	gen       uint64    // records issued, counted over all of the event's lives
	base      uint64    // gen at the last Init or Reset: gen == base means not recorded
	completed uint64    // the highest completed record
	err       error     // the error of the most recently completed record
	at        time.Time // when record number completed completed
	recOn     recorder  // the stream of the most recent record
	waiters   []*waiter
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

// wake signals the waiters of ws waiting for at most g and returns the
// others, in ws's storage.
func wake(ws []*waiter, g uint64) []*waiter {
	keep := ws[:0]
	for _, w := range ws {
		if w.gen <= g {
			w.signal()
		} else {
			keep = append(keep, w)
		}
	}
	clear(ws[len(keep):])
	return keep
}

// signal wakes w without blocking.
func (w *waiter) signal() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// Init makes e a new, unrecorded event named name (which may be empty).
func (e *Event) Init(name string) {
	e.name, e.id = name, eventIDs.Add(1)
	e.auto.Store(nil)
}

// Name returns the event's name, or "event#N" for an unnamed event. The
// latter is built once, so that a hook told of every record and wait of a
// reused unnamed event does not allocate each time.
func (e *Event) Name() string {
	if e.name != "" {
		return e.name
	}
	if p := e.auto.Load(); p != nil {
		return *p
	}
	n := "event#" + strconv.FormatUint(e.id, 10)
	e.auto.CompareAndSwap(nil, &n)
	return *e.auto.Load()
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

// Target returns the record a wait issued now refers to: the most recent
// one, or the next if the event has not been recorded.
func (e *Event) Target() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.target()
}

// issue numbers a new record of e on s and returns its number.
func (e *Event) issue(s recorder) uint64 {
	e.mu.Lock()
	e.gen++
	g := e.gen
	e.recOn = s
	e.mu.Unlock()
	return g
}

// complete marks record g as done with err at now and wakes whoever waits
// for it.
func (e *Event) complete(g uint64, err error, now time.Time) {
	e.mu.Lock()
	if g > e.completed {
		e.completed, e.err, e.at = g, err, now
		e.waiters = wake(e.waiters, g)
	}
	e.mu.Unlock()
}

// removeWaiter unregisters w if it is still registered. e.mu is held.
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

// Query reports whether the event's most recent record has completed.
func (e *Event) Query() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gen != e.base && e.completed >= e.gen
}

// Err returns the error the most recently completed record carries.
func (e *Event) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// Synchronize blocks until the event's current record (Target) completes
// and returns its error, or an *Error when ctx ends first.
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
		return &Error{Stream: e.recName(), Op: "Event.Synchronize", Err: CtxErr(ctx)}
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

// ErrNotRecorded reports that Elapsed was asked about an event whose most
// recent record has not completed (or that was never recorded).
var ErrNotRecorded = errors.New("hcomm: event not recorded or not complete")

// Elapsed returns the time from the completion of e's most recent record
// to the completion of end's, or an error wrapping ErrNotRecorded.
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

// Reset makes the event unrecorded; waits already issued are not affected.
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

// Release marks the event as finished with: a later record completes at
// once with ErrClosed.
func (e *Event) Release() {
	e.mu.Lock()
	e.released = true
	e.mu.Unlock()
}

// Package stream is the machinery under hcomm's Stream and Event: an
// ordered queue of work run by one goroutine per stream, events with
// numbered records, waits between streams bounded by a timeout that
// describe the chain of waits they are part of, and a pool of waiters so
// that reused streams and events allocate nothing.
//
// A Stream runs three kinds of item besides records and waits: functions
// (Go), and operations of a type C the owner chooses (the collectives of
// package hcomm), stored by value in the queue so that enqueueing them
// does not allocate and run by the Run function the stream was started
// with.
package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hcomm-go/hcomm/internal/clock"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/opctx"
)

// Error reports a failure of a stream itself rather than of the work on
// it. Package hcomm exports it as StreamError.
type Error struct {
	Stream string // the stream's name
	Op     string // "WaitEvent", "Synchronize", "Abort", ...
	Err    error
}

func (e *Error) Error() string {
	return "hcomm: stream " + strconv.Quote(e.Stream) + ": " + e.Op + ": " + errs.TrimPrefix(e.Err.Error())
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Ops is what a stream does with its operations of type C.
type Ops[C any] struct {
	// Run runs an operation with the stream's context.
	Run func(ctx context.Context, op *C) error
	// Skip is called instead of Run for an operation reached after the
	// stream failed with sticky.
	Skip func(stream string, op *C, sticky error)
	// Name names an operation for a Hook (nil: "op").
	Name func(op *C) string
}

// A Hook is told what a stream's goroutine does, as it does it: each
// event record (what is the event's name, d zero), each wait for an event
// (what "wait", event the awaited one's name, d how long it waited), each
// operation or function it ran (what is Ops.Name's or "Go"; event ""),
// with the item's error. It runs on the stream's goroutine and must
// return quickly.
type Hook func(what, event string, start time.Time, d time.Duration, err error)

// Stream is an ordered queue of work and the goroutine that runs it. Its
// zero value is unusable: Start it in place.
type Stream[C any] struct {
	name    string
	id      uint64
	timeout time.Duration // bound on each event wait; 0: none
	clock   clock.Clock   // times events; nil: the system clock (tests set a clock.Fake)
	ops     Ops[C]
	onExit  func()
	hook    Hook // nil: none

	mu      sync.Mutex
	q       []item[C] // ring buffer of pending items
	head, n int
	enq     uint64 // items enqueued
	done    uint64 // items finished
	err     error  // sticky
	closed  bool
	syncs   []*waiter // Synchronize calls, waiting for done >= gen
	blocked *Event    // the event the worker waits for (diagnostics)
	blockG  uint64

	wake  chan struct{} // capacity 1: new work, a completed event, Abort
	self  waiter        // the worker's registration on events; ch == wake
	timer *time.Timer
	ctx   opctx.Cancel // the context its work runs with
	loop  func()

	cur      item[C] // the item the goroutine runs (a field, so that running it does not allocate)
	closeErr Error   // the sticky error of Close, kept here so Close does not allocate
}

type itemKind uint8

const (
	itemFunc itemKind = iota + 1
	itemRecord
	itemWait
	itemOp
)

// item is one unit of work, stored by value in the ring so that enqueueing
// does not allocate.
type item[C any] struct {
	kind itemKind
	fn   func(context.Context) error // itemFunc
	ev   *Event                      // itemRecord, itemWait
	gen  uint64                      // the record made or awaited
	op   C                           // itemOp
}

var streamIDs atomic.Uint64

// Start initializes s and starts its goroutine. An empty name becomes
// prefix + "stream#N" (or just "stream#N" when reported, if prefix is
// empty too). Each wait for an event is bounded by timeout (0: none).
// onExit, if not nil, runs on the stream's goroutine when it exits after
// Close.
func (s *Stream[C]) Start(name, prefix string, timeout time.Duration, ops Ops[C], onExit func()) {
	s.q, s.wake = make([]item[C], 16), make(chan struct{}, 1)
	s.self.ch = s.wake
	s.timer = time.NewTimer(time.Hour)
	s.timer.Stop()
	s.loop = s.run
	s.id = streamIDs.Add(1)
	if name == "" && prefix != "" {
		name = prefix + "stream#" + strconv.FormatUint(s.id, 10)
	}
	s.name, s.timeout, s.ops, s.onExit = name, timeout, ops, onExit
	s.ctx.Reset()
	go s.loop() // a func value: starting the goroutine allocates no closure
}

// SetHook makes the stream tell h what it does. It must be called before
// Start.
func (s *Stream[C]) SetHook(h Hook) { s.hook = h }

// SetClock makes the stream time its event records with c. It must be
// called before anything is enqueued.
func (s *Stream[C]) SetClock(c clock.Clock) { s.clock = c }

// Name returns the stream's name, or "stream#N" for an unnamed stream.
func (s *Stream[C]) Name() string {
	if s.name != "" {
		return s.name
	}
	return "stream#" + strconv.FormatUint(s.id, 10)
}

// String returns the stream's name, quoted.
func (s *Stream[C]) String() string { return strconv.Quote(s.Name()) }

// push appends it to the queue; false if the stream is closed.
func (s *Stream[C]) push(it item[C]) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if s.n == len(s.q) {
		q := make([]item[C], 2*len(s.q))
		for i := 0; i < s.n; i++ {
			q[i] = s.q[(s.head+i)%len(s.q)]
		}
		s.q, s.head = q, 0
	}
	s.q[(s.head+s.n)%len(s.q)] = it
	s.n++
	s.enq++
	s.mu.Unlock()
	s.self.signal()
	return true
}

// Go enqueues fn (nil: nothing).
func (s *Stream[C]) Go(fn func(ctx context.Context) error) {
	if fn == nil {
		return
	}
	s.push(item[C]{kind: itemFunc, fn: fn})
}

// Enqueue puts op on the stream; false if the stream is closed.
func (s *Stream[C]) Enqueue(op *C) bool {
	return s.push(item[C]{kind: itemOp, op: *op})
}

// RecordEvent records e at this point of the stream.
func (s *Stream[C]) RecordEvent(e *Event) {
	g := e.issue(s)
	if e.isReleased() {
		e.complete(g, &Error{Stream: s.Name(), Op: "Record", Err: fmt.Errorf("%w: event %s was released", errs.ErrClosed, e)}, time.Now())
		return
	}
	if !s.push(item[C]{kind: itemRecord, ev: e, gen: g}) {
		e.complete(g, &Error{Stream: s.Name(), Op: "Record", Err: errs.ErrClosed}, time.Now())
	}
}

// WaitEvent makes the work enqueued on s after this call wait until e's
// current record completes (its next record, if it has none).
func (s *Stream[C]) WaitEvent(e *Event) {
	e.mu.Lock()
	g := e.target()
	pending := e.completed < g || e.err != nil
	e.mu.Unlock()
	if pending {
		s.WaitRecord(e, g)
	}
}

// WaitRecord makes the work enqueued on s after this call wait until
// record g of e completes (see Event.Target).
func (s *Stream[C]) WaitRecord(e *Event, g uint64) {
	s.push(item[C]{kind: itemWait, ev: e, gen: g})
}

// Synchronize blocks until everything enqueued before the call has
// finished, and returns the stream's sticky error, or an *Error when ctx
// ends first.
func (s *Stream[C]) Synchronize(ctx context.Context) error {
	s.mu.Lock()
	if s.done >= s.enq {
		err := s.err
		s.mu.Unlock()
		return err
	}
	w := getWaiter(s.enq)
	s.syncs = append(s.syncs, w)
	s.mu.Unlock()
	select {
	case <-w.ch:
		putWaiter(w)
		return s.Err()
	case <-ctx.Done():
		s.mu.Lock()
		for i, x := range s.syncs {
			if x == w {
				s.syncs = append(s.syncs[:i], s.syncs[i+1:]...)
				break
			}
		}
		s.mu.Unlock()
		putWaiter(w)
		return &Error{Stream: s.Name(), Op: "Synchronize", Err: CtxErr(ctx)}
	}
}

// Query reports whether everything enqueued so far has finished.
func (s *Stream[C]) Query() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done >= s.enq
}

// Err returns the stream's sticky error, or nil.
func (s *Stream[C]) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Abort fails the stream with an error wrapping ErrAborted and cause.
func (s *Stream[C]) Abort(cause error) {
	if cause == nil {
		cause = errors.New("Abort called")
	}
	s.fail(&Error{Stream: s.Name(), Op: "Abort", Err: fmt.Errorf("%w: %w", errs.ErrAborted, cause)})
}

// fail makes err sticky (if nothing failed before) and cancels the
// stream's context.
func (s *Stream[C]) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.ctx.Cancel()
	s.self.signal()
}

// Close aborts the stream with ErrClosed (unless it failed already) and
// releases it; idempotent.
func (s *Stream[C]) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.closeErr = Error{Stream: s.Name(), Op: "Close", Err: errs.ErrClosed}
	s.mu.Unlock()
	s.fail(&s.closeErr)
}

// run is the stream's goroutine.
func (s *Stream[C]) run() {
	for {
		s.mu.Lock()
		for s.n == 0 {
			if s.closed {
				s.mu.Unlock()
				s.recycle()
				return
			}
			s.mu.Unlock()
			<-s.wake
			s.mu.Lock()
		}
		s.cur = s.q[s.head]
		s.q[s.head] = item[C]{}
		s.head = (s.head + 1) % len(s.q)
		s.n--
		sticky := s.err
		s.mu.Unlock()

		err := s.exec(&s.cur, sticky)
		s.cur = item[C]{}

		s.mu.Lock()
		failed := false
		if err != nil && s.err == nil {
			s.err, failed = err, true
		}
		s.done++
		if len(s.syncs) > 0 {
			s.syncs = wake(s.syncs, s.done)
		}
		s.mu.Unlock()
		if failed {
			s.ctx.Cancel()
		}
	}
}

// recycle releases what the stream holds once its goroutine is done.
func (s *Stream[C]) recycle() {
	s.mu.Lock()
	for _, w := range s.syncs {
		w.signal()
	}
	clear(s.syncs)
	s.syncs = s.syncs[:0]
	s.mu.Unlock()
	select {
	case <-s.wake:
	default:
	}
	if s.onExit != nil {
		s.onExit()
	}
}

// exec runs one item. sticky is the stream's error when it started.
func (s *Stream[C]) exec(it *item[C], sticky error) error {
	if s.hook != nil {
		return s.execHooked(it, sticky)
	}
	return s.exec1(it, sticky)
}

// execHooked is exec telling the hook.
func (s *Stream[C]) execHooked(it *item[C], sticky error) error {
	c := clock.Or(s.clock)
	start := c.Now()
	if it.kind == itemRecord {
		// Told before the event completes, so that whoever the event
		// releases finds the record already reported.
		s.hook("record", it.ev.Name(), start, 0, sticky)
	}
	err := s.exec1(it, sticky)
	switch it.kind {
	case itemWait:
		if sticky == nil {
			s.hook("wait", it.ev.Name(), start, c.Now().Sub(start), err)
		}
	case itemFunc:
		if sticky == nil {
			s.hook("Go", "", start, c.Now().Sub(start), err)
		}
	case itemOp:
		if sticky == nil {
			what := "op"
			if s.ops.Name != nil {
				what = s.ops.Name(&it.op)
			}
			s.hook(what, "", start, c.Now().Sub(start), err)
		}
	}
	return err
}

// exec1 runs one item.
func (s *Stream[C]) exec1(it *item[C], sticky error) error {
	switch it.kind {
	case itemRecord:
		it.ev.complete(it.gen, sticky, clock.Or(s.clock).Now())
		return nil
	case itemWait:
		if sticky != nil {
			return nil
		}
		return s.waitEvent(it.ev, it.gen)
	case itemFunc:
		if sticky != nil {
			return nil
		}
		return s.call(it.fn)
	case itemOp:
		if sticky != nil {
			s.ops.Skip(s.Name(), &it.op, sticky)
			return nil
		}
		return s.ops.Run(&s.ctx, &it.op)
	}
	return nil
}

// call runs fn, turning a panic into an error.
func (s *Stream[C]) call(fn func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Stream: s.Name(), Op: "Go", Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	return fn(&s.ctx)
}

// waitEvent blocks the stream's goroutine until record g of e completes,
// the stream is aborted, or the timeout passes.
func (s *Stream[C]) waitEvent(e *Event, g uint64) error {
	s.mu.Lock()
	s.blocked, s.blockG = e, g
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.blocked = nil
		s.mu.Unlock()
	}()
	var expired <-chan time.Time
	if s.timeout > 0 {
		s.timer.Reset(s.timeout)
		defer s.timer.Stop()
		expired = s.timer.C
	}
	registered := false
	for {
		e.mu.Lock()
		if e.completed >= g {
			if registered {
				e.removeWaiter(&s.self)
			}
			err := e.err
			e.mu.Unlock()
			if err != nil {
				return &Error{Stream: s.Name(), Op: "WaitEvent",
					Err: fmt.Errorf("event %s failed: %w", e, err)}
			}
			return nil
		}
		if !registered {
			s.self.gen = g
			e.waiters = append(e.waiters, &s.self)
			registered = true
		}
		e.mu.Unlock()
		if err := s.ctx.Err(); err != nil {
			e.mu.Lock()
			e.removeWaiter(&s.self)
			e.mu.Unlock()
			return err
		}
		select {
		case <-s.wake:
		case <-expired:
			e.mu.Lock()
			e.removeWaiter(&s.self)
			e.mu.Unlock()
			return &Error{Stream: s.Name(), Op: "WaitEvent",
				Err: &waitTimeout{after: s.timeout, chain: describeWait(s, e, g)}}
		}
	}
}

// recorder is a stream as an event and a timeout report see it.
type recorder interface {
	String() string
	Name() string
	blockedOn() (*Event, uint64) // the event the stream waits for, nil if none
}

// Waiting reports whether the stream's goroutine is waiting for an event.
func (s *Stream[C]) Waiting() bool {
	e, _ := s.blockedOn()
	return e != nil
}

func (s *Stream[C]) blockedOn() (*Event, uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.blocked, s.blockG
}

// describeWait follows the chain of waits starting with s waiting for
// record g of e, for a timeout report.
func describeWait(s recorder, e *Event, g uint64) string {
	var b strings.Builder
	seen := map[recorder]bool{s: true}
	fmt.Fprintf(&b, "stream %s waits for event %s", s, e)
	for range 16 {
		e.mu.Lock()
		issued, on := e.gen, e.recOn
		e.mu.Unlock()
		if issued < g || on == nil {
			b.WriteString(", which has not been recorded since the wait was issued (nothing will complete it)")
			return b.String()
		}
		fmt.Fprintf(&b, " recorded on stream %s", on)
		if seen[on] {
			b.WriteString(": dependency cycle")
			return b.String()
		}
		seen[on] = true
		next, ng := on.blockedOn()
		if next == nil {
			b.WriteString(", which is still running earlier work")
			return b.String()
		}
		fmt.Fprintf(&b, ", which waits for event %s", next)
		e, g = next, ng
	}
	b.WriteString(", ...")
	return b.String()
}

// waitTimeout is a wait on an event that lasted too long.
type waitTimeout struct {
	after time.Duration
	chain string
}

func (e *waitTimeout) Error() string {
	return fmt.Sprintf("timed out after %v: %s", e.after, e.chain)
}

func (e *waitTimeout) Unwrap() []error { return []error{errs.ErrTimeout, context.DeadlineExceeded} }

// CtxErr is the error for a wait cut short by ctx: it matches
// ErrTimeout and context.DeadlineExceeded when the deadline passed, and
// context.Canceled otherwise.
func CtxErr(ctx context.Context) error {
	if ctx.Err() == context.DeadlineExceeded {
		return ctxDeadline{}
	}
	return ctx.Err()
}

// ctxDeadline is a wait ended by its context's deadline.
type ctxDeadline struct{}

func (ctxDeadline) Error() string {
	return "timed out: the caller's context deadline passed (context deadline exceeded)"
}

func (ctxDeadline) Unwrap() []error { return []error{errs.ErrTimeout, context.DeadlineExceeded} }

// Set is the streams a communicator made, which its Close closes. A
// stream is added when it is made and removed by its exit hook (Start's
// onExit).
type Set[C any] struct {
	mu     sync.Mutex
	m      map[*Stream[C]]struct{}
	closed bool // Close was called: the communicator is closed
}

// Add puts s in the set and reports whether it did: once the set is
// closed it does not, and the caller closes s itself.
func (t *Set[C]) Add(s *Stream[C]) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	if t.m == nil {
		t.m = map[*Stream[C]]struct{}{}
	}
	t.m[s] = struct{}{}
	return true
}

// Remove takes s out of the set.
func (t *Set[C]) Remove(s *Stream[C]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, s)
}

// Close closes every stream in the set. A stream that exits meanwhile
// waits for the set's lock to leave it.
func (t *Set[C]) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for s := range t.m {
		s.Close()
	}
}

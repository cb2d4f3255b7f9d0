package hcomm

import (
	"context"
	"errors"
	"fmt"
	"github.com/hcomm-go/hcomm/internal/clock"
	"github.com/hcomm-go/hcomm/internal/opctx"
	"github.com/hcomm-go/hcomm/internal/sched"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A Stream is an ordered queue of asynchronous work — computation enqueued
// with Go, collectives enqueued with the Async functions (AllReduceAsync,
// ...), event records and waits — executed one item at a time, in order,
// by the stream's own goroutine. Enqueueing never blocks the caller.
//
// Streams order themselves against each other with events: record an
// event on a compute stream, make the communication stream wait for it,
// record a completion event there, make the compute stream wait for that;
// communication then overlaps whatever computation does not depend on it.
//
//	grads := compute.Record()
//	comm.WaitEvent(grads)                              // comm waits, the caller does not
//	hcomm.AllReduceAsync(comm, c, g, g, hcomm.Avg)
//	done := comm.Record()
//	compute.WaitEvent(done)
//	compute.Go(optimizerStep)
//
// # Errors
//
// The first error of an item (a Go function's, a collective's, a failed
// wait) is sticky: later Go functions and collectives on the stream are
// skipped, Synchronize and Err return it, and events recorded afterwards
// complete carrying it, so streams waiting on them fail too. A collective
// skipped this way aborts its communicator, so that its peers fail at once
// instead of waiting for it until their timeout.
//
// A wait that lasts longer than the stream's timeout fails with an error
// matching ErrTimeout that describes the chain of waits it is part of,
// such as
//
//	stream "comm": WaitEvent: timed out after 2s: stream "comm" waits for
//	event "grads" recorded on stream "compute", which waits for event
//	"done" recorded on stream "comm": dependency cycle
//
// # Context, cancellation, lifetime
//
// Enqueued functions and collectives run with a context the stream owns.
// Abort cancels it and fails the stream; Close does the same and releases
// the stream. Collectives keep their communicator's own timeout as well.
// Neither Abort nor Close waits for the item running at the time; call
// Synchronize first to let the work finish.
//
// A *Stream is one stream for its whole life: streams are not pooled, so a
// closed stream is never reused by a later NewStream, and using one after
// Close is harmless: Close again does nothing, work enqueued is skipped,
// records complete with ErrClosed, and Err and Synchronize report
// ErrClosed. (The price is a few allocations per NewStream; a loop that
// creates no streams or events — reusing them, with RecordEvent instead of
// Record — allocates nothing.) All methods are safe for concurrent use.
type Stream struct {
	name    string
	id      uint64
	timeout time.Duration // bound on each event wait; 0: none
	clock   clock.Clock   // times events; nil: the system clock (tests set a clock.Fake)

	mu      sync.Mutex
	q       []item // ring buffer of pending items
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

	closeErr StreamError // the sticky error of Close, kept here so Close does not allocate
	owner    *Comm       // the communicator that made it (NewStream), which closes it
}

// StreamConfig configures a free-standing Stream. A nil *StreamConfig
// means defaults.
type StreamConfig struct {
	// Timeout bounds each wait of the stream for an event (WaitEvent).
	// Zero means DefaultTimeout; negative means no limit.
	Timeout time.Duration
}

// StreamError reports a failure of a stream itself rather than of the
// work on it: a wait that timed out or whose event failed, a stream that
// was closed or aborted, a Synchronize cut short by its context. It
// unwraps to the cause (ErrTimeout, ErrAborted, ErrClosed, a context
// error, or the failed event's error).
type StreamError struct {
	Stream string // the stream's name
	Op     string // "WaitEvent", "Synchronize", "Abort", ...
	Err    error
}

func (e *StreamError) Error() string {
	return "hcomm: stream " + strconv.Quote(e.Stream) + ": " + e.Op + ": " + trimPrefix(e.Err.Error())
}

// Unwrap returns the cause.
func (e *StreamError) Unwrap() error { return e.Err }

type itemKind uint8

const (
	itemFunc itemKind = iota + 1
	itemRecord
	itemWait
	itemColl
)

// item is one unit of work, stored by value in the ring so that enqueueing
// does not allocate.
type item struct {
	kind itemKind
	fn   func(context.Context) error // itemFunc
	ev   *Event                      // itemRecord, itemWait
	gen  uint64                      // the record made or awaited
	coll collArgs                    // itemColl
}

var streamIDs atomic.Uint64

// NewStream returns a free-standing stream. The name
// appears in error messages; empty means "stream#N".
func NewStream(name string, cfg *StreamConfig) *Stream {
	timeout := DefaultTimeout
	if cfg != nil && cfg.Timeout != 0 {
		timeout = max(cfg.Timeout, 0)
	}
	return newStream(name, "", timeout)
}

// NewStream returns a stream for this communicator's asynchronous work.
// Its waits for events are bounded by the communicator's timeout
// (Config.Timeout). It is an ordinary Stream: it may run work for other
// communicators too. Closing the communicator closes it.
func (c *Comm) NewStream(name string) *Stream {
	prefix := ""
	if name == "" {
		prefix = "rank" + strconv.Itoa(c.rank) + "/"
	}
	s := newStream(name, prefix, c.set.timeout)
	c.streamsMu.Lock()
	if c.streams == nil {
		c.streams = map[*Stream]struct{}{}
	}
	c.streams[s] = struct{}{}
	s.owner = c
	c.streamsMu.Unlock()
	return s
}

// newStream makes a stream and starts its goroutine. An empty name
// becomes prefix + "stream#N".
func newStream(name, prefix string, timeout time.Duration) *Stream {
	s := &Stream{q: make([]item, 16), wake: make(chan struct{}, 1)}
	s.self.ch = s.wake
	s.timer = time.NewTimer(time.Hour)
	s.timer.Stop()
	s.loop = s.run
	s.id = streamIDs.Add(1)
	if name == "" && prefix != "" {
		name = prefix + "stream#" + strconv.FormatUint(s.id, 10)
	}
	s.name, s.timeout, s.clock = name, timeout, nil
	s.head, s.n, s.enq, s.done = 0, 0, 0, 0
	s.err, s.closed = nil, false
	s.ctx.Reset()
	go s.loop() // a func value: starting the goroutine allocates no closure
	return s
}

// Name returns the stream's name, or "stream#N" for an unnamed stream.
func (s *Stream) Name() string {
	if s.name != "" {
		return s.name
	}
	return "stream#" + strconv.FormatUint(s.id, 10)
}

// String returns the stream's name, quoted.
func (s *Stream) String() string { return strconv.Quote(s.Name()) }

// push appends it to the queue; false if the stream is closed.
func (s *Stream) push(it *item) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	if s.n == len(s.q) {
		q := make([]item, 2*len(s.q))
		for i := 0; i < s.n; i++ {
			q[i] = s.q[(s.head+i)%len(s.q)]
		}
		s.q, s.head = q, 0
	}
	s.q[(s.head+s.n)%len(s.q)] = *it
	s.n++
	s.enq++
	s.mu.Unlock()
	s.self.signal()
	return true
}

// Go enqueues fn. It runs after everything enqueued before it, with the
// stream's context, unless the stream has failed by then; a non-nil error
// (or a panic, turned into an error) fails the stream. A nil fn is a no-op.
func (s *Stream) Go(fn func(ctx context.Context) error) {
	if fn == nil {
		return
	}
	s.push(&item{kind: itemFunc, fn: fn})
}

// Record records a new event, from the pool, at this point of the stream
// and returns it; Release it when done with it.
func (s *Stream) Record() *Event {
	e := NewEvent("")
	s.RecordEvent(e)
	return e
}

// RecordEvent records e at this point of the stream: the record completes
// when everything enqueued before it has finished. Recording an event again
// re-arms it; see Event for what waits and queries refer to. A record on a
// closed stream completes at once with ErrClosed.
func (s *Stream) RecordEvent(e *Event) {
	g := e.issue(s)
	if e.isReleased() {
		e.complete(g, &StreamError{Stream: s.Name(), Op: "Record", Err: fmt.Errorf("%w: event %s was released", ErrClosed, e)}, time.Now())
		return
	}
	if !s.push(&item{kind: itemRecord, ev: e, gen: g}) {
		e.complete(g, &StreamError{Stream: s.Name(), Op: "Record", Err: ErrClosed}, time.Now())
	}
}

// WaitEvent makes the work enqueued on s after this call wait until e's
// current record completes (its next record, if it has none), without
// blocking the caller, as cudaStreamWaitEvent does. If that record carries
// an error, s fails with an error wrapping it.
func (s *Stream) WaitEvent(e *Event) {
	e.mu.Lock()
	g := e.target()
	if e.completed >= g && e.err == nil {
		e.mu.Unlock()
		return // nothing to wait for
	}
	e.refs++
	e.mu.Unlock()
	s.waitGen(e, g)
}

// waitGen enqueues a wait for record g of e, whose refs the caller has
// counted.
func (s *Stream) waitGen(e *Event, g uint64) {
	if !s.push(&item{kind: itemWait, ev: e, gen: g}) {
		e.unref()
	}
}

// Synchronize blocks until everything enqueued on the stream before the
// call has finished, and returns the stream's sticky error. It returns
// early, with a *StreamError, when ctx ends; the work goes on.
func (s *Stream) Synchronize(ctx context.Context) error {
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
		return &StreamError{Stream: s.Name(), Op: "Synchronize", Err: ctxErr(ctx)}
	}
}

// Query reports whether everything enqueued so far has finished.
func (s *Stream) Query() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done >= s.enq
}

// Err returns the stream's sticky error, or nil.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Abort fails the stream at once: its context is cancelled, the item
// running stops if it heeds the context, and everything not yet started is
// skipped (records complete carrying the error). Later work is skipped
// too. The sticky error wraps ErrAborted and cause (which may be nil).
// Abort does not wait.
func (s *Stream) Abort(cause error) {
	if cause == nil {
		cause = errors.New("Abort called")
	}
	s.fail(&StreamError{Stream: s.Name(), Op: "Abort", Err: fmt.Errorf("%w: %w", ErrAborted, cause)})
}

// fail makes err sticky (if nothing failed before) and cancels the
// stream's context.
func (s *Stream) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.ctx.Cancel()
	s.self.signal()
}

// Close aborts the stream with ErrClosed (unless it has failed already)
// and releases it: work not yet started is skipped, later enqueues are
// refused (their records complete with ErrClosed), and the stream's
// goroutine exits when it has finished the item it is running.
// Close does not wait; Synchronize before Close to finish the work. It is
// idempotent.
func (s *Stream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.closeErr = StreamError{Stream: s.Name(), Op: "Close", Err: ErrClosed}
	s.mu.Unlock()
	s.fail(&s.closeErr)
	return nil
}

// run is the stream's goroutine.
func (s *Stream) run() {
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
		it := s.q[s.head]
		s.q[s.head] = item{}
		s.head = (s.head + 1) % len(s.q)
		s.n--
		sticky := s.err
		s.mu.Unlock()

		err := s.exec(&it, sticky)

		s.mu.Lock()
		failed := false
		if err != nil && s.err == nil {
			s.err, failed = err, true
		}
		s.done++
		if len(s.syncs) > 0 {
			ws := s.syncs[:0]
			for _, w := range s.syncs {
				if w.gen <= s.done {
					w.signal()
				} else {
					ws = append(ws, w)
				}
			}
			clear(s.syncs[len(ws):])
			s.syncs = ws
		}
		s.mu.Unlock()
		if failed {
			s.ctx.Cancel()
		}
	}
}

// recycle releases what the stream holds once its goroutine is done.
func (s *Stream) recycle() {
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
	if c := s.owner; c != nil {
		c.streamsMu.Lock()
		delete(c.streams, s)
		c.streamsMu.Unlock()
		s.owner = nil
	}
}

// exec runs one item. sticky is the stream's error when it started.
func (s *Stream) exec(it *item, sticky error) error {
	switch it.kind {
	case itemRecord:
		it.ev.complete(it.gen, sticky, clock.Or(s.clock).Now())
		return nil
	case itemWait:
		defer it.ev.unref()
		if sticky != nil {
			return nil
		}
		return s.waitEvent(it.ev, it.gen)
	case itemFunc:
		if sticky != nil {
			return nil
		}
		return s.call(it.fn)
	case itemColl:
		if sticky != nil {
			it.coll.c.Abort(fmt.Errorf("stream %q skipped %s after an earlier failure: %w", s.Name(), it.coll.name(), sticky))
			return nil
		}
		return it.coll.run(&s.ctx)
	}
	return nil
}

// call runs fn, turning a panic into an error.
func (s *Stream) call(fn func(context.Context) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &StreamError{Stream: s.Name(), Op: "Go", Err: fmt.Errorf("panic: %v", p)}
		}
	}()
	return fn(&s.ctx)
}

// waitEvent blocks the stream's goroutine until record g of e completes,
// the stream is aborted, or the timeout passes.
func (s *Stream) waitEvent(e *Event, g uint64) error {
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
				return &StreamError{Stream: s.Name(), Op: "WaitEvent",
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
			return &StreamError{Stream: s.Name(), Op: "WaitEvent",
				Err: &waitTimeout{after: s.timeout, chain: s.describeWait(e, g)}}
		}
	}
}

// describeWait follows the chain of waits starting with s waiting for
// record g of e, for a timeout report.
func (s *Stream) describeWait(e *Event, g uint64) string {
	var b strings.Builder
	seen := map[*Stream]bool{s: true}
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
		on.mu.Lock()
		next, ng := on.blocked, on.blockG
		on.mu.Unlock()
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

func (e *waitTimeout) Unwrap() []error { return []error{ErrTimeout, context.DeadlineExceeded} }

// collArgs is an enqueued operation: its communicator and its call.
type collArgs struct {
	c *Comm
	args
}

func (a *collArgs) run(ctx context.Context) error { return a.c.do(ctx, &a.args) }

// enqueue checks a collective's arguments and puts it on s. An argument
// error is returned at once: nothing is enqueued, and neither the stream
// nor the communicator fails.
func (s *Stream) enqueue(a *collArgs) error {
	if a.c == nil {
		return &OpError{Op: a.name() + "Async", Rank: -1, Peer: -1, Err: invalid("nil *Comm")}
	}
	if err := a.c.checkArgs(&a.args); err != nil {
		return err
	}
	if !s.push(&item{kind: itemColl, coll: *a}) {
		return &StreamError{Stream: s.Name(), Op: a.name() + "Async", Err: ErrClosed}
	}
	return nil
}

// AllReduceAsync enqueues AllReduce on s and returns at once.
//
// Every collective has such an asynchronous form (ReduceAsync,
// BroadcastAsync, ..., SendAsync, RecvAsync). Each runs its collective on
// the stream after the work enqueued before it, with the stream's context,
// exactly as the synchronous form would: same arguments, same in-place
// rules. Argument errors (ErrInvalidArgument, a nil *Comm) are returned at
// once and nothing is enqueued: the stream and the communicator stay
// usable, as after the synchronous form's argument error. An error while
// running fails the stream (see Stream); a nil return means only that the
// call was enqueued. Enqueueing on a closed stream returns ErrClosed. The buffers and
// count slices must stay untouched until the collective has finished:
// record an event after it, or Synchronize the stream.
//
// Collectives on one communicator must still be issued in the same order
// on every rank; enqueueing all of a communicator's collectives on one
// stream keeps them in order.
func AllReduceAsync[T Element](s *Stream, c *Comm, send, recv []T, op Op) error {
	return s.enqueue(&collArgs{c, args{coll: sched.AllReduce, send: bytesOf(send), recv: bytesOf(recv), dt: DTypeOf[T](), op: op}})
}

// ReduceAsync enqueues Reduce on s; see AllReduceAsync.
func ReduceAsync[T Element](s *Stream, c *Comm, send, recv []T, op Op, root int) error {
	return s.enqueue(&collArgs{c, args{coll: sched.Reduce, send: bytesOf(send), recv: bytesOf(recv), dt: DTypeOf[T](), op: op, root: root}})
}

// BroadcastAsync enqueues Broadcast on s; see AllReduceAsync.
func BroadcastAsync[T Element](s *Stream, c *Comm, buf []T, root int) error {
	return s.enqueue(&collArgs{c, args{coll: sched.Broadcast, recv: bytesOf(buf), dt: DTypeOf[T](), root: root}})
}

// AllGatherAsync enqueues AllGather on s; see AllReduceAsync.
func AllGatherAsync[T Element](s *Stream, c *Comm, send, recv []T) error {
	return s.enqueue(&collArgs{c, args{coll: sched.AllGather, send: bytesOf(send), recv: bytesOf(recv), dt: DTypeOf[T]()}})
}

// AllGatherVAsync enqueues AllGatherV on s; see AllReduceAsync.
func AllGatherVAsync[T Element](s *Stream, c *Comm, send, recv []T, counts []int) error {
	return s.enqueue(&collArgs{c, args{coll: sched.AllGather, v: true, send: bytesOf(send), recv: bytesOf(recv), dt: DTypeOf[T](), counts: counts}})
}

// ReduceScatterAsync enqueues ReduceScatter on s; see AllReduceAsync.
func ReduceScatterAsync[T Element](s *Stream, c *Comm, send, recv []T, op Op) error {
	return s.enqueue(&collArgs{c, args{coll: sched.ReduceScatter, send: bytesOf(send), recv: bytesOf(recv), dt: DTypeOf[T](), op: op}})
}

// ReduceScatterVAsync enqueues ReduceScatterV on s; see AllReduceAsync.
func ReduceScatterVAsync[T Element](s *Stream, c *Comm, send, recv []T, counts []int, op Op) error {
	return s.enqueue(&collArgs{c, args{coll: sched.ReduceScatter, v: true, send: bytesOf(send), recv: bytesOf(recv), dt: DTypeOf[T](), op: op, counts: counts}})
}

// AllToAllAsync enqueues AllToAll on s; see AllReduceAsync.
func AllToAllAsync[T Element](s *Stream, c *Comm, send, recv []T) error {
	return s.enqueue(&collArgs{c, args{coll: sched.AllToAll, send: bytesOf(send), recv: bytesOf(recv), dt: DTypeOf[T]()}})
}

// AllToAllVAsync enqueues AllToAllV on s; see AllReduceAsync.
func AllToAllVAsync[T Element](s *Stream, c *Comm, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	return s.enqueue(&collArgs{c, args{coll: sched.AllToAll, v: true, send: bytesOf(send), recv: bytesOf(recv), dt: DTypeOf[T](),
		counts: sendCounts, recvCounts: recvCounts}})
}

// GatherAsync enqueues Gather on s; see AllReduceAsync.
func GatherAsync[T Element](s *Stream, c *Comm, send, recv []T, root int) error {
	return s.enqueue(&collArgs{c, args{coll: sched.Gather, send: bytesOf(send), recv: bytesOf(recv), dt: DTypeOf[T](), root: root}})
}

// ScatterAsync enqueues Scatter on s; see AllReduceAsync.
func ScatterAsync[T Element](s *Stream, c *Comm, send, recv []T, root int) error {
	return s.enqueue(&collArgs{c, args{coll: sched.Scatter, send: bytesOf(send), recv: bytesOf(recv), dt: DTypeOf[T](), root: root}})
}

// BarrierAsync enqueues Barrier on s; see AllReduceAsync.
func BarrierAsync(s *Stream, c *Comm) error {
	return s.enqueue(&collArgs{c, args{coll: sched.Barrier}})
}

// SendAsync enqueues Send on s; see AllReduceAsync. As with Send, two ranks that send to each
// other must not both enqueue their Send before their Recv on a single
// stream each: use a stream per direction.
func SendAsync[T Element](s *Stream, c *Comm, buf []T, peer, tag int) error {
	return s.enqueue(&collArgs{c, args{coll: sched.SendRecv, send: bytesOf(buf), dt: DTypeOf[T](), root: peer, tag: tag}})
}

// RecvAsync enqueues Recv on s; see AllReduceAsync.
func RecvAsync[T Element](s *Stream, c *Comm, buf []T, peer, tag int) error {
	return s.enqueue(&collArgs{c, args{coll: sched.SendRecv, recvSide: true, recv: bytesOf(buf), dt: DTypeOf[T](), root: peer, tag: tag}})
}

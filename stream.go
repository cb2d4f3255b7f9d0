package hcomm

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/stream"
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
	s stream.Stream[collArgs]
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
// was closed or aborted, a Synchronize cut short by its context. Its
// fields are Stream (the stream's name), Op ("WaitEvent", "Synchronize",
// "Abort", ...) and Err, the cause, to which it unwraps (ErrTimeout,
// ErrAborted, ErrClosed, a context error, or the failed event's error).
type StreamError = stream.Error

// collOps is how a stream runs and skips collectives.
var collOps = stream.Ops[collArgs]{
	Run: func(ctx context.Context, a *collArgs) error { return a.c.do(ctx, &a.args) },
	Skip: func(s string, a *collArgs, sticky error) {
		a.c.Abort(fmt.Errorf("stream %q skipped %s after an earlier failure: %w", s, a.Name(), sticky))
	},
	Name: func(a *collArgs) string { return a.Name() },
}

// NewStream returns a free-standing stream. The name
// appears in error messages; empty means "stream#N".
func NewStream(name string, cfg *StreamConfig) *Stream {
	timeout := DefaultTimeout
	if cfg != nil && cfg.Timeout != 0 {
		timeout = max(cfg.Timeout, 0)
	}
	s := &Stream{}
	s.s.Start(name, "", timeout, collOps, nil)
	return s
}

// NewStream returns a stream for this communicator's asynchronous work.
// Its waits for events are bounded by the communicator's timeout
// (Config.Timeout). It is an ordinary Stream: it may run work for other
// communicators too. Closing the communicator closes it; on a closed
// communicator NewStream returns a stream already closed.
func (c *Comm) NewStream(name string) *Stream {
	prefix := ""
	if name == "" {
		prefix = "rank" + strconv.Itoa(c.rank) + "/"
	}
	s := &Stream{}
	if o := c.set.observer; o != nil && o.Stream != nil {
		s.s.SetHook(c.streamHook(o.Stream, &s.s))
	}
	s.s.Start(name, prefix, c.set.Timeout, collOps, func() { c.streamSet.Remove(&s.s) })
	// Added once started: a Close racing with this call closes it whole,
	// or has closed the set and this call closes it.
	if !c.streamSet.Add(&s.s) {
		s.s.Close()
	}
	return s
}

// Name returns the stream's name, or "stream#N" for an unnamed stream.
func (s *Stream) Name() string { return s.s.Name() }

// String returns the stream's name, quoted.
func (s *Stream) String() string { return s.s.String() }

// Go enqueues fn. It runs after everything enqueued before it, with the
// stream's context, unless the stream has failed by then; a non-nil error
// (or a panic, turned into an error) fails the stream. A nil fn is a no-op.
func (s *Stream) Go(fn func(ctx context.Context) error) { s.s.Go(fn) }

// Record records a new event at this point of the stream and returns it;
// Release it when done with it.
func (s *Stream) Record() *Event {
	e := NewEvent("")
	s.RecordEvent(e)
	return e
}

// RecordEvent records e at this point of the stream: the record completes
// when everything enqueued before it has finished. Recording an event again
// re-arms it; see Event for what waits and queries refer to. A record on a
// closed stream completes at once with ErrClosed.
func (s *Stream) RecordEvent(e *Event) { s.s.RecordEvent(&e.e) }

// WaitEvent makes the work enqueued on s after this call wait until e's
// current record completes (its next record, if it has none), without
// blocking the caller, as cudaStreamWaitEvent does. If that record carries
// an error, s fails with an error wrapping it.
func (s *Stream) WaitEvent(e *Event) { s.s.WaitEvent(&e.e) }

// Synchronize blocks until everything enqueued on the stream before the
// call has finished, and returns the stream's sticky error. It returns
// early, with a *StreamError, when ctx ends; the work goes on.
func (s *Stream) Synchronize(ctx context.Context) error { return s.s.Synchronize(ctx) }

// Query reports whether everything enqueued so far has finished.
func (s *Stream) Query() bool { return s.s.Query() }

// Err returns the stream's sticky error, or nil.
func (s *Stream) Err() error { return s.s.Err() }

// Abort fails the stream at once: its context is cancelled, the item
// running stops if it heeds the context, and everything not yet started is
// skipped (records complete carrying the error). Later work is skipped
// too. The sticky error wraps ErrAborted and cause (which may be nil).
// Abort does not wait.
func (s *Stream) Abort(cause error) { s.s.Abort(cause) }

// Close aborts the stream with ErrClosed (unless it has failed already)
// and releases it: work not yet started is skipped, later enqueues are
// refused (their records complete with ErrClosed), and the stream's
// goroutine exits when it has finished the item it is running.
// Close does not wait; Synchronize before Close to finish the work. It is
// idempotent.
func (s *Stream) Close() error {
	s.s.Close()
	return nil
}

// collArgs is an enqueued operation: its communicator and its call.
type collArgs struct {
	c *Comm
	args
}

// enqueue checks a collective's arguments and puts it on s. An argument
// error is returned at once: nothing is enqueued, and neither the stream
// nor the communicator fails.
func (s *Stream) enqueue(a *collArgs) error {
	if a.c == nil {
		return &OpError{Op: a.Name() + "Async", Rank: -1, Peer: -1, Err: invalid("nil *Comm")}
	}
	if err := a.c.checkArgs(&a.args); err != nil {
		return err
	}
	if !s.s.Enqueue(a) {
		return &StreamError{Stream: s.Name(), Op: a.Name() + "Async", Err: ErrClosed}
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
	return s.enqueue(&collArgs{c, args{Coll: sched.AllReduce, Send: bytesOf(send), Recv: bytesOf(recv), DT: int(DTypeOf[T]()), Op: int(op)}})
}

// ReduceAsync enqueues Reduce on s; see AllReduceAsync.
func ReduceAsync[T Element](s *Stream, c *Comm, send, recv []T, op Op, root int) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.Reduce, Send: bytesOf(send), Recv: bytesOf(recv), DT: int(DTypeOf[T]()), Op: int(op), Root: root}})
}

// BroadcastAsync enqueues Broadcast on s; see AllReduceAsync.
func BroadcastAsync[T Element](s *Stream, c *Comm, buf []T, root int) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.Broadcast, Recv: bytesOf(buf), DT: int(DTypeOf[T]()), Root: root}})
}

// AllGatherAsync enqueues AllGather on s; see AllReduceAsync.
func AllGatherAsync[T Element](s *Stream, c *Comm, send, recv []T) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.AllGather, Send: bytesOf(send), Recv: bytesOf(recv), DT: int(DTypeOf[T]())}})
}

// AllGatherVAsync enqueues AllGatherV on s; see AllReduceAsync.
func AllGatherVAsync[T Element](s *Stream, c *Comm, send, recv []T, counts []int) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.AllGather, V: true, Send: bytesOf(send), Recv: bytesOf(recv), DT: int(DTypeOf[T]()), Counts: counts}})
}

// ReduceScatterAsync enqueues ReduceScatter on s; see AllReduceAsync.
func ReduceScatterAsync[T Element](s *Stream, c *Comm, send, recv []T, op Op) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.ReduceScatter, Send: bytesOf(send), Recv: bytesOf(recv), DT: int(DTypeOf[T]()), Op: int(op)}})
}

// ReduceScatterVAsync enqueues ReduceScatterV on s; see AllReduceAsync.
func ReduceScatterVAsync[T Element](s *Stream, c *Comm, send, recv []T, counts []int, op Op) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.ReduceScatter, V: true, Send: bytesOf(send), Recv: bytesOf(recv), DT: int(DTypeOf[T]()), Op: int(op), Counts: counts}})
}

// AllToAllAsync enqueues AllToAll on s; see AllReduceAsync.
func AllToAllAsync[T Element](s *Stream, c *Comm, send, recv []T) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.AllToAll, Send: bytesOf(send), Recv: bytesOf(recv), DT: int(DTypeOf[T]())}})
}

// AllToAllVAsync enqueues AllToAllV on s; see AllReduceAsync.
func AllToAllVAsync[T Element](s *Stream, c *Comm, send []T, sendCounts []int, recv []T, recvCounts []int) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.AllToAll, V: true, Send: bytesOf(send), Recv: bytesOf(recv), DT: int(DTypeOf[T]()),
		Counts: sendCounts, RecvCounts: recvCounts}})
}

// GatherAsync enqueues Gather on s; see AllReduceAsync.
func GatherAsync[T Element](s *Stream, c *Comm, send, recv []T, root int) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.Gather, Send: bytesOf(send), Recv: bytesOf(recv), DT: int(DTypeOf[T]()), Root: root}})
}

// ScatterAsync enqueues Scatter on s; see AllReduceAsync.
func ScatterAsync[T Element](s *Stream, c *Comm, send, recv []T, root int) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.Scatter, Send: bytesOf(send), Recv: bytesOf(recv), DT: int(DTypeOf[T]()), Root: root}})
}

// BarrierAsync enqueues Barrier on s; see AllReduceAsync.
func BarrierAsync(s *Stream, c *Comm) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.Barrier}})
}

// SendAsync enqueues Send on s; see AllReduceAsync. As with Send, two ranks that send to each
// other must not both enqueue their Send before their Recv on a single
// stream each: use a stream per direction.
func SendAsync[T Element](s *Stream, c *Comm, buf []T, peer, tag int) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.SendRecv, Send: bytesOf(buf), DT: int(DTypeOf[T]()), Root: peer, Tag: tag}})
}

// RecvAsync enqueues Recv on s; see AllReduceAsync.
func RecvAsync[T Element](s *Stream, c *Comm, buf []T, peer, tag int) error {
	return s.enqueue(&collArgs{c, args{Coll: sched.SendRecv, RecvSide: true, Recv: bytesOf(buf), DT: int(DTypeOf[T]()), Root: peer, Tag: tag}})
}

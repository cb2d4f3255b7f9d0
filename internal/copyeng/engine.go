// Package copyeng is hcomm's copy engine: a small pool of worker goroutines
// that perform memory moves described by descriptors, the CPU counterpart of
// a DMA engine.
//
// A producer fills descriptors (source, destination, length, an optional
// 2-D shape, flags) and submits them to the engine's bounded lock-free
// multi-producer ring. Submitting does not wake anybody: Ring, the
// doorbell, does, once for however many descriptors were written before
// it, and a woken worker drains the ring. A full ring makes Submit wait for
// room until its context ends; nothing is ever dropped.
//
// Each descriptor has a status word. A worker stores the final status (OK
// or an error code) last, after the move and the signal, so that a caller
// that observes a final status by polling (Desc.Done, Desc.Status) also
// observes the data. Callers that would rather sleep than poll wait with
// Engine.Wait; in coalescing mode the engine wakes waiters once every K
// completions, or T after the oldest completion not yet announced, or at
// once for a descriptor flagged Notify.
//
// # Memory ordering
//
// Everything a producer writes into a descriptor and its source buffer
// before Submit is published to the worker by the ring cell's sequence
// store (an atomic store; the worker's atomic load of the same sequence
// number orders its reads after it). The worker's move is published by its
// atomic store of the status word, so a caller's atomic load of a final
// status orders its reads of the destination after the move. With the
// SignalAfter flag, the worker performs the move, then an atomic add on the
// signal word: a process that observes the new signal value with an atomic
// load sees the moved data (Go's atomics are sequentially consistent, so
// the add is also a release). FenceBefore makes a descriptor wait until
// every descriptor submitted before it on the engine has stored its status.
package copyeng

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Status is the value of a descriptor's status word.
type Status uint32

// Status codes. Pending is the only non-final one.
const (
	Pending     Status = iota
	OK                 // moved
	OutOfBounds        // the shape reaches outside the source or destination; nothing moved
	PeerLost           // the peer holding the source or destination is gone
	Aborted            // the engine was closed, or the mover gave up
)

func (s Status) String() string {
	switch s {
	case Pending:
		return "pending"
	case OK:
		return "ok"
	case OutOfBounds:
		return "out of bounds"
	case PeerLost:
		return "peer lost"
	case Aborted:
		return "aborted"
	}
	return fmt.Sprintf("status(%d)", uint32(s))
}

// Flags modify how a descriptor is performed.
type Flags uint8

const (
	// FenceBefore: start only after every descriptor submitted earlier on
	// this engine has completed.
	FenceBefore Flags = 1 << iota
	// SignalAfter: after the move, atomically add Add to *Signal.
	SignalAfter
	// Notify: wake the engine's waiters as soon as this descriptor
	// completes, whatever the coalescing settings.
	Notify
)

// A Mover performs a descriptor's move itself, for destinations that are
// not memory of this process (another process's pages, a remote host). It
// returns the final status.
type Mover interface {
	Move(d *Desc) Status
}

// Desc describes one move of Rows rows of Len bytes: row i is read from
// Src[SrcOff+i*SrcPitch:][:Len] and written to Dst[DstOff+i*DstPitch:][:Len].
// Rows 0 means 1. A descriptor may be reused once it is complete.
type Desc struct {
	Src, Dst           []byte
	SrcOff, DstOff     int
	Len                int
	Rows               int
	SrcPitch, DstPitch int
	Flags              Flags
	Signal             *uint64 // with SignalAfter
	Add                uint64
	Mover              Mover // nil: copy between Src and Dst

	status atomic.Uint32
	pos    uint64 // ring position, set by the ring
}

// Status returns the descriptor's status word.
func (d *Desc) Status() Status { return Status(d.status.Load()) }

// Done reports whether the descriptor has completed (with any status).
func (d *Desc) Done() bool { return d.status.Load() != uint32(Pending) }

// Err returns nil for OK, an error naming the status otherwise.
func (d *Desc) Err() error {
	switch s := d.Status(); s {
	case OK:
		return nil
	case Pending:
		return errors.New("copy engine: descriptor still pending")
	default:
		return &StatusError{Status: s}
	}
}

// StatusError reports a descriptor that completed unsuccessfully.
type StatusError struct{ Status Status }

func (e *StatusError) Error() string { return "copy engine: " + e.Status.String() }

// Span returns the extent in bytes a shape of rows rows of n bytes at pitch
// covers, and false when it overflows or is negative.
func Span(rows, n, pitch int) (int, bool) {
	if rows <= 0 {
		rows = 1
	}
	if n < 0 || pitch < 0 || (rows > 1 && pitch < n && n > 0) {
		return 0, false
	}
	if n == 0 {
		return 0, true
	}
	if rows > 1 && pitch > (math.MaxInt-n)/(rows-1) {
		return 0, false
	}
	return (rows-1)*pitch + n, true
}

// InBounds reports whether the shape starting at off fits in size bytes.
func InBounds(off, rows, n, pitch, size int) bool {
	span, ok := Span(rows, n, pitch)
	return ok && off >= 0 && off <= size && span <= size-off
}

// Config sets up an engine; the zero value means defaults.
type Config struct {
	Workers  int           // default: min(GOMAXPROCS, 4)
	Depth    int           // ring cells (rounded up to a power of two); default 1024
	Coalesce int           // K: wake waiters every K completions; 0 or 1: at every completion
	Delay    time.Duration // T: wake waiters at most T after a completion; default 50µs
	// Pin, if set, is called first on every worker goroutine: it may lock
	// the goroutine to a thread on chosen CPUs (the communicator passes
	// its HCOMM_CPU_AFFINITY pinning, as for the executor's workers).
	Pin func()
}

// ErrClosed is returned by Submit after Close.
var ErrClosed = errors.New("copy engine closed")

// Stats counts what an engine did.
type Stats struct {
	Doorbells uint64 // Ring calls that woke a worker
	Wakeups   uint64 // worker wake-ups
	Completed uint64 // descriptors completed
	Notifies  uint64 // waiter wake-ups issued
}

// Engine is a copy engine. Its methods are safe for concurrent use.
type Engine struct {
	q        *ring
	bell     chan struct{}
	quit     chan struct{}
	wg       sync.WaitGroup
	idle     atomic.Int32
	claims   []atomic.Uint64 // per worker: lower bound of the position it may run
	pin      func()
	closed   atomic.Bool
	k        uint64
	delay    time.Duration
	stats    struct{ doorbells, wakeups, completed, notifies atomic.Uint64 }
	space    chan struct{} // a token when a full ring made room
	waiting  atomic.Int32  // producers waiting for room
	sleepers atomic.Int32  // callers in Wait

	nmu       sync.Mutex
	notifyCh  chan struct{} // closed to wake waiters
	announced uint64        // completions announced
	timer     *time.Timer
	armed     bool
}

const idleClaim = math.MaxUint64

// New starts an engine.
func New(cfg *Config) *Engine {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.Workers <= 0 {
		c.Workers = min(runtime.GOMAXPROCS(0), 4)
	}
	if c.Depth <= 0 {
		c.Depth = 1024
	}
	if c.Coalesce <= 0 {
		c.Coalesce = 1
	}
	if c.Delay <= 0 {
		c.Delay = 50 * time.Microsecond
	}
	e := &Engine{
		q:        newRing(c.Depth),
		bell:     make(chan struct{}, c.Workers),
		quit:     make(chan struct{}),
		claims:   make([]atomic.Uint64, c.Workers),
		k:        uint64(c.Coalesce),
		delay:    c.Delay,
		space:    make(chan struct{}, 1),
		notifyCh: make(chan struct{}),
		pin:      c.Pin,
	}
	e.timer = time.AfterFunc(time.Hour, e.timerFired)
	e.timer.Stop()
	for i := range e.claims {
		e.claims[i].Store(idleClaim)
	}
	e.wg.Add(c.Workers)
	for i := range c.Workers {
		go e.worker(i)
	}
	return e
}

// Depth returns the ring's capacity.
func (e *Engine) Depth() int { return e.q.cap() }

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{
		Doorbells: e.stats.doorbells.Load(),
		Wakeups:   e.stats.wakeups.Load(),
		Completed: e.stats.completed.Load(),
		Notifies:  e.stats.notifies.Load(),
	}
}

// Idle returns how many workers are asleep waiting for a doorbell.
func (e *Engine) Idle() int { return int(e.idle.Load()) }

// Submit writes the descriptors into the ring without ringing the doorbell.
// When the ring is full it rings the doorbell and waits for room until ctx
// ends, then returns how many descriptors it submitted and ctx's error
// (wrapped); the rest were not submitted and will not run. Each descriptor
// must not be in flight already.
func (e *Engine) Submit(ctx context.Context, ds ...*Desc) (int, error) {
	for i, d := range ds {
		d.status.Store(uint32(Pending))
		for !e.q.push(d) {
			if e.closed.Load() {
				return i, ErrClosed
			}
			if err := e.waitRoom(ctx); err != nil {
				return i, fmt.Errorf("copy engine: queue of %d full: %w", e.q.cap(), err)
			}
		}
		if e.closed.Load() {
			// Close may have drained the ring already; make sure
			// this descriptor does not stay pending.
			e.drainAborted()
			return i + 1, ErrClosed
		}
	}
	return len(ds), nil
}

// waitRoom rings the doorbell and waits until a worker frees a cell.
func (e *Engine) waitRoom(ctx context.Context) error {
	e.waiting.Add(1)
	defer e.waiting.Add(-1)
	e.Ring()
	if !e.q.full() {
		return nil
	}
	select {
	case <-e.space:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-e.quit:
		return ErrClosed
	}
}

// Ring is the doorbell: it wakes one sleeping worker, which drains the
// ring. Several descriptors submitted before one Ring cost one wake-up.
func (e *Engine) Ring() {
	if e.idle.Load() > 0 {
		select {
		case e.bell <- struct{}{}:
			e.stats.doorbells.Add(1)
		default: // a token is pending already
		}
	}
}

// Post submits the descriptors and rings the doorbell.
func (e *Engine) Post(ctx context.Context, ds ...*Desc) (int, error) {
	n, err := e.Submit(ctx, ds...)
	e.Ring()
	return n, err
}

func (e *Engine) worker(i int) {
	defer e.wg.Done()
	if e.pin != nil {
		e.pin()
	}
	claim := &e.claims[i]
	for {
		for {
			d := e.q.pop(claim)
			if d == nil {
				break
			}
			if e.waiting.Load() > 0 {
				select {
				case e.space <- struct{}{}:
				default:
				}
			}
			// Share a long queue with a sleeping worker.
			if !e.q.empty() && e.idle.Load() > 0 {
				e.Ring()
			}
			// d belongs to its owner again once run stores its
			// status (it may be reused at once): read pos before.
			pos := d.pos
			e.run(i, d)
			claim.Store(pos + 1)
		}
		claim.Store(idleClaim)
		e.idle.Add(1)
		// A descriptor pushed before the idle count rose gets no
		// doorbell token meant for us: look once more.
		if !e.q.empty() && !e.closed.Load() {
			e.idle.Add(-1)
			continue
		}
		select {
		case <-e.bell:
			e.idle.Add(-1)
			e.stats.wakeups.Add(1)
		case <-e.quit:
			e.idle.Add(-1)
			return
		}
	}
}

// run performs d on worker i.
func (e *Engine) run(i int, d *Desc) {
	if d.Flags&FenceBefore != 0 {
		e.fence(i, d.pos)
	}
	var st Status
	switch {
	case e.closed.Load():
		st = Aborted
	case d.Mover != nil:
		st = d.Mover.Move(d)
	default:
		st = d.copy()
	}
	if st == OK && d.Flags&SignalAfter != 0 && d.Signal != nil {
		atomic.AddUint64(d.Signal, d.Add)
	}
	urgent := d.Flags&Notify != 0
	d.status.Store(uint32(st)) // d is its owner's again
	e.completed(urgent)
}

// fence waits until no other worker may still run a position before pos.
// A worker stores a lower bound of the position it claims before claiming
// it, so a claim made before ours is visible here.
func (e *Engine) fence(self int, pos uint64) {
	for spins := 0; ; spins++ {
		ok := true
		for j := range e.claims {
			if j != self && e.claims[j].Load() < pos {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		if spins < 64 {
			runtime.Gosched()
		} else {
			time.Sleep(time.Microsecond)
		}
	}
}

// copy performs an ordinary descriptor.
func (d *Desc) copy() Status {
	rows := max(d.Rows, 1)
	if !InBounds(d.SrcOff, rows, d.Len, d.SrcPitch, len(d.Src)) ||
		!InBounds(d.DstOff, rows, d.Len, d.DstPitch, len(d.Dst)) {
		return OutOfBounds
	}
	if rows == 1 {
		copy(d.Dst[d.DstOff:d.DstOff+d.Len], d.Src[d.SrcOff:d.SrcOff+d.Len])
		return OK
	}
	for r := range rows {
		s, t := d.SrcOff+r*d.SrcPitch, d.DstOff+r*d.DstPitch
		copy(d.Dst[t:t+d.Len], d.Src[s:s+d.Len])
	}
	return OK
}

// completed counts a completion and wakes waiters when it is time. Only
// completions that happen while somebody waits are counted towards K.
func (e *Engine) completed(urgent bool) {
	n := e.stats.completed.Add(1)
	// The status store came before this load and a waiter's increment
	// before its status load, so one of the two sees the other.
	if e.sleepers.Load() == 0 {
		return
	}
	e.nmu.Lock()
	switch {
	case urgent || n-e.announced >= e.k:
		e.announce(n)
	case !e.armed:
		e.armed = true
		e.timer.Reset(e.delay)
	}
	e.nmu.Unlock()
}

// announce wakes the waiters; e.nmu is held.
func (e *Engine) announce(n uint64) {
	if n <= e.announced {
		return
	}
	e.announced = n
	close(e.notifyCh)
	e.notifyCh = make(chan struct{})
	e.stats.notifies.Add(1)
	if e.armed {
		e.armed = false
		e.timer.Stop()
	}
}

func (e *Engine) timerFired() {
	e.nmu.Lock()
	e.armed = false
	e.announce(e.stats.completed.Load())
	e.nmu.Unlock()
}

// Wait blocks until d completes or ctx ends, sleeping between the engine's
// coalesced notifications, and returns d's error.
func (e *Engine) Wait(ctx context.Context, d *Desc) error {
	e.sleepers.Add(1)
	defer e.sleepers.Add(-1)
	for !d.Done() {
		e.nmu.Lock()
		ch := e.notifyCh
		e.nmu.Unlock()
		if d.Done() {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return d.Err()
}

// Poll spins until d completes or ctx ends, without sleeping, and returns
// d's error. It is the lowest-latency way to wait and burns a CPU.
func (e *Engine) Poll(ctx context.Context, d *Desc) error {
	for spins := 0; !d.Done(); spins++ {
		if spins&255 == 255 {
			if err := ctx.Err(); err != nil {
				return err
			}
			runtime.Gosched()
		}
	}
	return d.Err()
}

// Close stops the workers. Descriptors still in the ring complete with
// Aborted. It does not wait for descriptors being moved by a Mover beyond
// their Move call.
func (e *Engine) Close() {
	if e.closed.Swap(true) {
		return
	}
	close(e.quit)
	e.wg.Wait()
	e.drainAborted()
	e.nmu.Lock()
	e.timer.Stop()
	e.announce(e.stats.completed.Load() + 1)
	e.nmu.Unlock()
}

// drainAborted completes whatever is left in the ring with Aborted.
func (e *Engine) drainAborted() {
	var claim atomic.Uint64
	for d := e.q.pop(&claim); d != nil; d = e.q.pop(&claim) {
		d.status.Store(uint32(Aborted))
		e.stats.completed.Add(1)
	}
	e.nmu.Lock()
	e.announce(e.stats.completed.Load())
	e.nmu.Unlock()
}

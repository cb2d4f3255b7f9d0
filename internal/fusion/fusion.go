// Package fusion is the machinery under hcomm's Bucketer: the layout of
// registered tensors into fusion buffers, the launch rule (in order, when
// complete, when the window expires, or on Flush/Wait) and the per-step
// bookkeeping. It reduces through a small view of a communicator (Comm)
// and runs the reductions on a stream (Stream), so that it imports
// neither the root package nor its types.
package fusion

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/hcomm-go/hcomm/internal/clock"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/stream"
)

// ErrLate and ErrUnused are hcomm/fusion's errors of the same names, set
// by that package at init (they are declared there, for its go doc): a
// tensor marked ready after its bucket was flushed without it, and a step
// that ended with tensors never marked ready.
var ErrLate, ErrUnused error

// Comm is the communicator a Bucketer reduces with, as it sees it.
type Comm interface {
	Rank() int
	Size() int
	// AllGather gathers each rank's v.
	AllGather(ctx context.Context, v int64) ([]int64, error)
	// AllReduce reduces buf, holding elements of type dt, in place.
	AllReduce(ctx context.Context, buf []byte, dt int) error
	// Launched reports a bucket's launch (to an observer).
	Launched(l Launch)
}

// Launch describes the launch of one bucket.
type Launch struct {
	Bucket   int
	Bytes    int
	Tensors  int
	NotReady int
	Flushed  bool
	At       time.Time
}

// Stream is the stream the reductions run on.
type Stream interface {
	Go(fn func(context.Context) error)
	RecordEvent(e *stream.Event)
	WaitRecord(e *stream.Event, g uint64)
}

// Config configures a Bucketer; every field is required except Window,
// AllowUnused and Log.
type Config struct {
	Threshold   int           // a bucket's target size in bytes
	Window      time.Duration // see hcomm.BucketConfig.Window
	Op          int           // the reduction, for the layout digest
	AllowUnused bool
	MaxElems    int          // the most elements a buffer may hold
	Log         *slog.Logger // for launches with tensors not ready; nil: none
	// Err makes the error an operation of the Bucketer ("Build", "Ready",
	// ...) returns; peer is the rank involved, or -1.
	Err func(op string, peer int, err error) error
	// DTypeName names an element type in messages.
	DTypeName func(dt int) string
}

// Bucketer fuses registered tensors into buckets and reduces each on the
// stream when its turn comes (see hcomm.Bucketer).
type Bucketer struct {
	c        Comm // nil: every operation fails
	s        Stream
	op       int
	thresh   int
	window   time.Duration
	unused   bool // AllowUnused
	maxElems int
	log      *slog.Logger
	err      func(op string, peer int, err error) error
	dtName   func(int) string

	mu       sync.Mutex
	grads    []*Grad
	buckets  []*bucket
	built    bool
	closed   bool
	next     int  // the next bucket to launch this step
	flushing bool // Flush or Wait: launch everything
	timer    clock.Timer
	clock    clock.Clock // nil: the system clock; tests set a clock.Fake
	armed    time.Time   // the deadline the timer is set for, or zero
}

// bucket is one fusion buffer and the tensors in it.
type bucket struct {
	b        *Bucketer
	index    int
	dt       int
	members  []*Grad
	buf      []byte
	ready    int
	first    time.Time // when its first member became ready this step
	launched bool
	warned   bool          // a flush without some members was logged at WARN
	contrib  []bool        // at launch: whether each member contributes
	ev       *stream.Event // completion, re-armed every step
	run      func(context.Context) error
}

// Grad is a registered tensor.
type Grad struct {
	b     *Bucketer
	name  string
	index int // registration order
	dt    int
	es    int    // element size
	n     int    // elements
	user  []byte // the tensor, copied in and out; nil for a view
	bk    *bucket
	off   int // byte offset in bk.buf

	ready    bool
	late     bool // its bucket was flushed without it this step
	after    *stream.Event
	afterGen uint64
}

// Info describes one bucket of a built Bucketer.
type Info struct {
	Index   int
	DType   int
	Bytes   int
	Tensors []string // names, in buffer order
}

// New returns a Bucketer reducing with c (which may be nil: then every
// operation fails) on s.
func New(c Comm, s Stream, cfg Config) *Bucketer {
	return &Bucketer{c: c, s: s, op: cfg.Op, thresh: cfg.Threshold, window: cfg.Window,
		unused: cfg.AllowUnused, maxElems: cfg.MaxElems, log: cfg.Log, err: cfg.Err, dtName: cfg.DTypeName}
}

// SetClock makes the Bucketer time its window with c (tests). It must be
// called before Build.
func (b *Bucketer) SetClock(c clock.Clock) { b.clock = c }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errs.ErrInvalidArgument}, args...)...)
}

func (b *Bucketer) argErr(op string, err error) error { return b.err(op, -1, err) }

// Register adds a tensor of n elements of type dt (es bytes each) under
// name; user is its storage, copied in and out, or nil for a tensor that
// lives in the fusion buffer.
func (b *Bucketer) Register(name string, dt, es, n int, user []byte) (*Grad, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.c == nil:
		return nil, b.argErr("Register", invalid("nil *Comm"))
	case b.built:
		return nil, b.argErr("Register", invalid("tensor %q registered after Build", name))
	case n < 0:
		return nil, b.argErr("Register", invalid("tensor %q has %d elements", name, n))
	case n > b.maxElems:
		return nil, b.argErr("Register", invalid("tensor %q has %d elements, more than a buffer can hold (%d)", name, n, b.maxElems))
	}
	g := &Grad{b: b, name: name, index: len(b.grads), dt: dt, es: es, n: n, user: user}
	b.grads = append(b.grads, g)
	return g, nil
}

// View returns the bytes of g's storage in its bucket, checking that it
// holds elements of type dt. It fails before Build.
func (g *Grad) View(dt int) ([]byte, error) {
	b := g.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.built {
		return nil, b.argErr("View", invalid("View of %q before Build", g.name))
	}
	if dt != g.dt {
		return nil, b.argErr("View", invalid("tensor %q holds %v, not %v", g.name, b.dtName(g.dt), b.dtName(dt)))
	}
	if g.n == 0 {
		return []byte{}, nil
	}
	if g.off < 0 || g.n > (len(g.bk.buf)-g.off)/g.es {
		return nil, b.argErr("View", invalid("tensor %q lies outside its bucket", g.name))
	}
	return g.bk.buf[g.off : g.off+g.n*g.es], nil
}

// Build lays out the buckets and allocates their buffers, checking across
// the ranks that they agree. newEvent makes bucket i's completion event.
func (b *Bucketer) Build(ctx context.Context, newEvent func(i int) *stream.Event) error {
	b.mu.Lock()
	if b.c == nil {
		b.mu.Unlock()
		return b.argErr("Build", invalid("nil *Comm"))
	}
	if b.built {
		b.mu.Unlock()
		return b.argErr("Build", invalid("Build called twice"))
	}
	b.layout()
	digest := b.digest()
	b.mu.Unlock()

	all, err := b.c.AllGather(ctx, digest)
	if err != nil {
		return err
	}
	for r, d := range all {
		if d != digest {
			return b.err("Build", r, fmt.Errorf(
				"%w: rank %d registered different tensors (layout digest %016x, this rank's %016x)", errs.ErrMismatch, r, d, digest))
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// The layout is the same on every rank, so every rank refuses a bucket
	// too big to address alike.
	for _, bk := range b.buckets {
		size := 0
		for _, g := range bk.members {
			if g.n > (b.maxElems-size)/g.es {
				return b.argErr("Build", invalid("bucket %d overflows at tensor %q (%d elements)", bk.index, g.name, g.n))
			}
			size += g.n * g.es
		}
	}
	for _, bk := range b.buckets {
		size := 0
		for _, g := range bk.members {
			g.off = size
			size += g.n * g.es
		}
		words := make([]uint64, (size+7)/8) // 8-byte aligned for every element type
		if size > 0 {
			bk.buf = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
		}
		bk.contrib = make([]bool, len(bk.members))
		bk.ev = newEvent(bk.index)
		bk.run = bk.reduce
	}
	b.built = true
	return nil
}

// layout forms the buckets. b.mu is held.
func (b *Bucketer) layout() {
	open := map[int]*bucket{}
	var closed []*bucket
	sizes := map[*bucket]int{}
	low := map[*bucket]int{} // earliest registration index
	for i := len(b.grads) - 1; i >= 0; i-- {
		g := b.grads[i]
		bk := open[g.dt]
		if bk == nil {
			bk = &bucket{b: b, dt: g.dt}
			open[g.dt] = bk
		}
		bk.members = append(bk.members, g)
		g.bk = bk
		sizes[bk] = satAdd(sizes[bk], g.n*g.es, b.maxElems)
		low[bk] = i
		if sizes[bk] >= b.thresh {
			closed = append(closed, bk)
			delete(open, g.dt)
		}
	}
	for _, bk := range open {
		closed = append(closed, bk)
	}
	slices.SortFunc(closed, func(x, y *bucket) int { return low[y] - low[x] })
	for i, bk := range closed {
		bk.index = i
	}
	b.buckets = closed
}

// satAdd is a+b for non-negative a and b, saturating at limit (Build
// refuses such a bucket).
func satAdd(a, b, limit int) int {
	if b > limit-a {
		return limit
	}
	return a + b
}

// digest summarizes the layout for the cross-rank check. b.mu is held.
func (b *Bucketer) digest() int64 {
	h := fnv.New64a()
	var w [8]byte
	put := func(v int) {
		for i := range w {
			w[i] = byte(uint64(v) >> (8 * i))
		}
		h.Write(w[:])
	}
	put(len(b.buckets))
	for _, bk := range b.buckets {
		put(bk.dt)
		put(len(bk.members))
		for _, g := range bk.members {
			put(g.index)
			put(g.n)
		}
	}
	put(b.op)
	return int64(h.Sum64() >> 1)
}

// Buckets describes the buckets, in launch order (nil before Build).
func (b *Bucketer) Buckets() []Info {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.built {
		return nil
	}
	out := make([]Info, len(b.buckets))
	for i, bk := range b.buckets {
		names := make([]string, len(bk.members))
		for j, g := range bk.members {
			names[j] = g.name
		}
		out[i] = Info{Index: i, DType: bk.dt, Bytes: len(bk.buf), Tensors: names}
	}
	return out
}

// Name returns the name the tensor was registered under.
func (g *Grad) Name() string { return g.name }

// Bucket returns the index of the tensor's bucket (-1 before Build).
func (g *Grad) Bucket() int {
	g.b.mu.Lock()
	defer g.b.mu.Unlock()
	if !g.b.built {
		return -1
	}
	return g.bk.index
}

// Ready marks the tensor's contents final for this step, once e's
// current record completes if e is not nil.
func (g *Grad) Ready(e *stream.Event) error {
	b := g.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return b.argErr("Ready", errs.ErrClosed)
	case !b.built:
		return b.argErr("Ready", invalid("Ready of %q before Build", g.name))
	case g.late:
		return b.argErr("Ready", fmt.Errorf("%w: %q (bucket %d)", ErrLate, g.name, g.bk.index))
	case g.ready:
		return b.argErr("Ready", invalid("%q marked ready twice in one step", g.name))
	}
	if e != nil {
		g.after, g.afterGen = e, e.Target()
	}
	g.ready = true
	bk := g.bk
	bk.ready++
	if bk.ready == 1 {
		bk.first = clock.Or(b.clock).Now()
	}
	b.advance()
	return nil
}

// advance launches every bucket whose turn has come, and arms the window
// timer for the next one. b.mu is held.
func (b *Bucketer) advance() {
	now := time.Time{}
	for b.next < len(b.buckets) {
		bk := b.buckets[b.next]
		if !b.flushing && bk.ready < len(bk.members) {
			if b.window <= 0 || bk.first.IsZero() {
				break
			}
			if now.IsZero() {
				now = clock.Or(b.clock).Now()
			}
			if now.Sub(bk.first) < b.window {
				b.arm(bk.first.Add(b.window), now)
				break
			}
		}
		b.launch(bk)
		b.next++
	}
}

// arm sets the window timer to fire at deadline. b.mu is held.
func (b *Bucketer) arm(deadline, now time.Time) {
	if b.armed.Equal(deadline) {
		return
	}
	b.armed = deadline
	if b.timer == nil {
		b.timer = clock.Or(b.clock).AfterFunc(deadline.Sub(now), b.onWindow)
	} else {
		b.timer.Reset(deadline.Sub(now))
	}
}

func (b *Bucketer) onWindow() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = time.Time{}
	if !b.closed && b.built {
		b.advance()
	}
}

// launch enqueues bk's reduction. b.mu is held.
func (b *Bucketer) launch(bk *bucket) {
	bk.launched = true
	missing := 0
	for i, g := range bk.members {
		bk.contrib[i] = g.ready
		if !g.ready {
			g.late = true
			missing++
		}
		if g.after != nil {
			b.s.WaitRecord(g.after, g.afterGen)
			g.after = nil
		}
	}
	if missing > 0 {
		b.logUnready(bk, missing)
	}
	b.c.Launched(Launch{Bucket: bk.index, Bytes: len(bk.buf), Tensors: len(bk.members),
		NotReady: missing, Flushed: b.flushing, At: clock.Or(b.clock).Now()})
	b.s.Go(bk.run)
	b.s.RecordEvent(bk.ev)
}

// unreadyNames bounds the tensor names a bucket warning lists.
const unreadyNames = 4

// logUnready says that bk was launched with missing of its tensors not
// ready (they contribute zeros): at WARN the first time for each bucket,
// at DEBUG after that, so that a parameter unused every step does not
// flood the log. b.mu is held.
func (b *Bucketer) logUnready(bk *bucket, missing int) {
	log := b.log
	lvl := slog.LevelWarn
	if bk.warned {
		lvl = slog.LevelDebug
	}
	ctx := context.Background()
	if log == nil || !log.Enabled(ctx, lvl) {
		return
	}
	bk.warned = true
	var names []string
	for _, g := range bk.members {
		if !g.ready && len(names) < unreadyNames {
			names = append(names, g.name)
		}
	}
	if missing > len(names) {
		names = append(names, "…")
	}
	why := "its window expired"
	if b.flushing {
		why = "Flush or Wait"
	}
	msg := "hcomm: bucket launched with tensors not ready; they contribute zeros"
	if lvl == slog.LevelWarn {
		msg += " (later launches of this bucket like this one are logged at DEBUG)"
	}
	log.LogAttrs(ctx, lvl, msg, slog.Int("rank", b.c.Rank()), slog.Int("bucket", bk.index),
		slog.Int("not_ready", missing), slog.Int("tensors", len(bk.members)),
		slog.String("names", strings.Join(names, ", ")), slog.String("by", why))
}

// reduce runs on the stream: fill the buffer, reduce it, copy out.
func (bk *bucket) reduce(ctx context.Context) error {
	for i, g := range bk.members {
		slot := bk.buf[g.off : g.off+g.n*g.es]
		switch {
		case !bk.contrib[i]:
			clear(slot)
		case g.user != nil:
			copy(slot, g.user)
		}
	}
	if err := bk.b.c.AllReduce(ctx, bk.buf, bk.dt); err != nil {
		return err
	}
	for _, g := range bk.members {
		if g.user != nil {
			copy(g.user, bk.buf[g.off:g.off+g.n*g.es])
		}
	}
	return nil
}

// Event returns the event of the tensor's bucket (nil before Build).
func (g *Grad) Event() *stream.Event {
	g.b.mu.Lock()
	defer g.b.mu.Unlock()
	if !g.b.built {
		return nil
	}
	return g.bk.ev
}

// Wait blocks until the tensor's reduction of the current step is
// complete and returns its error.
func (g *Grad) Wait(ctx context.Context) error {
	ev := g.Event()
	if ev == nil {
		return g.b.argErr("Grad.Wait", invalid("Wait on %q before Build", g.name))
	}
	return ev.Synchronize(ctx)
}

// Flush launches every bucket not launched yet this step, in order.
func (b *Bucketer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.built && !b.closed {
		b.flushing = true
		b.advance()
	}
}

// Wait ends the step: it flushes, waits for every bucket's reduction and
// makes every tensor not ready again (see hcomm.Bucketer.Wait).
func (b *Bucketer) Wait(ctx context.Context) error {
	b.mu.Lock()
	if !b.built || b.closed {
		b.mu.Unlock()
		if b.closed {
			return b.argErr("Wait", errs.ErrClosed)
		}
		return b.argErr("Wait", invalid("Wait before Build"))
	}
	b.flushing = true
	b.advance()
	b.mu.Unlock()
	var first error
	for _, bk := range b.buckets {
		if err := bk.ev.Synchronize(ctx); err != nil {
			if ctx.Err() != nil {
				return err
			}
			if first == nil {
				first = err
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if first == nil && !b.unused {
		first = b.unusedErr()
	}
	for _, bk := range b.buckets {
		bk.ready, bk.first, bk.launched = 0, time.Time{}, false
		bk.ev.Reset()
		for _, g := range bk.members {
			g.ready, g.late = false, false
		}
	}
	b.next, b.flushing = 0, false
	return first
}

// unusedErr names the tensors not ready at the end of a step, or nil.
// b.mu is held.
func (b *Bucketer) unusedErr() error {
	var names []string
	n := 0
	for _, g := range b.grads {
		if !g.ready {
			n++
			if len(names) < 8 {
				names = append(names, strconv.Quote(g.name))
			}
		}
	}
	if n == 0 {
		return nil
	}
	more := ""
	if n > len(names) {
		more = fmt.Sprintf(" and %d more", n-len(names))
	}
	return b.argErr("Wait", fmt.Errorf("%w: %s%s reduced as zeros (set BucketConfig.AllowUnused if some tensors take no part in a step)",
		ErrUnused, strings.Join(names, ", "), more))
}

// Close releases the Bucketer: its timer stops and its events are
// released. It reports whether this call closed it (false if it was
// closed already).
func (b *Bucketer) Close() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
	}
	for _, g := range b.grads {
		g.after = nil
	}
	for _, bk := range b.buckets {
		if bk.ev != nil {
			bk.ev.Release()
		}
	}
	return true
}

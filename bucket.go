package hcomm

import (
	"context"
	"errors"
	"fmt"
	"github.com/hcomm-go/hcomm/internal/clock"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// DefaultBucketBytes is the fusion threshold a Bucketer uses when
// BucketConfig.Threshold is zero. Measured on two ranks (BenchmarkBucketSize
// in process; hcomm perf over shared memory and TCP), AllReduce reaches its
// full bandwidth from about 1–4 MiB up, so any size in the usual 25–64 MiB
// range loses nothing there. Bigger buckets pay off with many ranks on fast
// networks, where each of a ring's 2(n−1) steps carries size/n bytes plus a
// fixed latency: with 8 ranks, 20 µs per step and 12.5 GB/s, 25 MiB keeps
// that latency near a tenth of the time. The low end of the range is chosen
// because the step's last bucket cannot overlap computation: its reduction
// is pure waiting, in proportion to its size.
const DefaultBucketBytes = 25 << 20

// ErrLate reports that a tensor was marked ready after its bucket had been
// flushed without it (see Bucketer).
var ErrLate = errors.New("hcomm: tensor marked ready after its bucket was flushed")

// ErrUnused reports that a step ended (Bucketer.Wait) with tensors never
// marked ready: they were reduced as zeros. Set BucketConfig.AllowUnused
// when some tensors legitimately take no part in a step.
var ErrUnused = errors.New("hcomm: tensors not marked ready in the step")

// BucketConfig configures a Bucketer. Every rank must use the same values.
type BucketConfig struct {
	// Threshold is a bucket's target size in bytes: a bucket is closed
	// once its tensors reach it. Zero means DefaultBucketBytes.
	Threshold int

	// Window, if positive, bounds how long the bucket next in line waits
	// for its last tensors once its first one is ready; when it expires the
	// bucket is flushed with the tensors not yet ready contributing zeros.
	// Zero means: wait until every tensor of the bucket is ready (or Wait
	// or Flush is called).
	Window time.Duration

	// Op is the reduction. Zero means Sum.
	Op Op

	// Stream is the stream the reductions run on. Nil means a stream of
	// the Bucketer's own, closed by Close.
	Stream *Stream

	// AllowUnused lets a step end with tensors never marked ready (as
	// torch DDP's find_unused_parameters): they contribute zeros and Wait
	// succeeds. By default Wait reduces them as zeros too but then fails
	// with ErrUnused naming them, since a forgotten Ready silently zeroing
	// a gradient is usually a bug.
	AllowUnused bool
}

// A Bucketer fuses many tensors (gradients, typically) into few large
// AllReduce calls, and runs them asynchronously on a stream so that they
// overlap the computation of the tensors still to come.
//
// Use: register every tensor once, in the same order on every rank; call
// Build; then, every step, mark each tensor ready as soon as its contents
// are final, and call Wait at the end of the step:
//
//	b := hcomm.NewBucketer(c, hcomm.BucketConfig{Op: hcomm.Avg})
//	g1, _ := hcomm.Register(b, "layer1.w", w1grad)   // copied in and out
//	g2, _ := hcomm.RegisterView[float32](b, "layer2.w", n2) // lives in the fusion buffer
//	if err := b.Build(ctx); err != nil { ... }
//	w2grad, _ := hcomm.View[float32](g2)
//	for step := ... {
//		// backward pass, last layer first
//		compute(w2grad); g2.Ready()
//		compute(w1grad); g1.Ready()
//		if err := b.Wait(ctx); err != nil { ... } // all gradients reduced
//	}
//
// # Buckets
//
// Build forms the buckets from the registration order alone, so they are
// the same on every rank whatever order tensors become ready in:
//
//  1. The tensors are taken from the last registered to the first (the
//     order a backward pass usually produces gradients in). Each element
//     type has one open bucket; a tensor joins the open bucket of its type,
//     and a bucket holding Threshold bytes or more is closed. Tensors of
//     different types never share a bucket.
//  2. The buckets are numbered by their earliest-registered tensor, latest
//     first: bucket 0 holds the last registered tensor.
//
// Each bucket is one contiguous fusion buffer. A tensor registered with
// Register is copied into it when its bucket is launched and the result is
// copied back; one registered with RegisterView lives in it (View), and is
// reduced in place.
//
// # Launching
//
// Bucket k is launched — its AllReduce enqueued on the stream — once
// buckets 0..k-1 have been launched and either
//
//   - all its tensors are ready, or
//   - Window has passed since its first tensor became ready, or
//   - Flush or Wait is called.
//
// In the last two cases the tensors not yet ready contribute zeros (as
// unused parameters do) and marking them ready later in the step fails
// with ErrLate. Timing decides only when a bucket is launched, never what
// it holds or the order of launches, so every rank runs the same AllReduce
// calls in the same order and the results are bitwise the same on every
// rank and in every run.
//
// While a step is in flight the Bucketer's communicator must not be used
// for other collectives (their order relative to the buckets' would differ
// between ranks); Split a communicator for it if needed.
type Bucketer struct {
	c      *Comm
	op     Op
	thresh int
	window time.Duration
	s      *Stream
	ownS   bool
	unused bool // AllowUnused

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
	dt       DType
	members  []*Grad
	buf      []byte
	ready    int
	first    time.Time // when its first member became ready this step
	launched bool
	warned   bool   // a flush without some members was logged at WARN
	contrib  []bool // at launch: whether each member contributes
	ev       *Event // completion, re-armed every step
	run      func(context.Context) error
}

// A Grad is a tensor registered with a Bucketer.
type Grad struct {
	b     *Bucketer
	name  string
	index int // registration order
	dt    DType
	n     int    // elements
	user  []byte // the tensor, copied in and out; nil for a view
	bk    *bucket
	off   int // byte offset in bk.buf

	ready    bool
	late     bool // its bucket was flushed without it this step
	after    *Event
	afterGen uint64
}

// BucketInfo describes one bucket of a built Bucketer.
type BucketInfo struct {
	Index   int
	DType   DType
	Bytes   int
	Tensors []string // names, in buffer order
}

// NewBucketer returns a Bucketer reducing with c. cfg's zero fields mean
// defaults.
func NewBucketer(c *Comm, cfg BucketConfig) *Bucketer {
	b := &Bucketer{c: c, op: cfg.Op, thresh: cfg.Threshold, window: cfg.Window, s: cfg.Stream, unused: cfg.AllowUnused}
	if b.op == 0 {
		b.op = Sum
	}
	if b.thresh <= 0 {
		b.thresh = DefaultBucketBytes
	}
	if b.s == nil && c != nil {
		b.s, b.ownS = c.NewStream("rank"+strconv.Itoa(c.rank)+"/bucketer"), true
	}
	return b
}

// Stream returns the stream the reductions run on.
func (b *Bucketer) Stream() *Stream { return b.s }

// Register adds tensor t under name (for messages and BucketInfo). Its
// contents are copied into the fusion buffer when its bucket is launched
// and the reduced values copied back; t must not be modified from Ready
// until the reduction is complete (Grad.Wait or Bucketer.Wait).
// Registration must happen before Build, in the same order on every rank.
func Register[T Element](b *Bucketer, name string, t []T) (*Grad, error) {
	return b.register(name, DTypeOf[T](), len(t), bytesOf(t))
}

// RegisterView adds a tensor of n elements that lives in the fusion
// buffer: after Build, View returns it, and it is reduced in place without
// copies.
func RegisterView[T Element](b *Bucketer, name string, n int) (*Grad, error) {
	return b.register(name, DTypeOf[T](), n, nil)
}

func (b *Bucketer) register(name string, dt DType, n int, user []byte) (*Grad, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.c == nil:
		return nil, b.argErr("Register", invalid("nil *Comm"))
	case b.built:
		return nil, b.argErr("Register", invalid("tensor %q registered after Build", name))
	case n < 0:
		return nil, b.argErr("Register", invalid("tensor %q has %d elements", name, n))
	case n > maxElems:
		return nil, b.argErr("Register", invalid("tensor %q has %d elements, more than a buffer can hold (%d)", name, n, maxElems))
	}
	g := &Grad{b: b, name: name, index: len(b.grads), dt: dt, n: n, user: user}
	b.grads = append(b.grads, g)
	return g, nil
}

func (b *Bucketer) argErr(op string, err error) error {
	r := -1
	if b.c != nil {
		r = b.c.rank
	}
	return &OpError{Op: "Bucketer." + op, Rank: r, Peer: -1, Err: err}
}

// View returns the storage of a tensor registered with RegisterView (or,
// for one registered with Register, its slot in the fusion buffer). It
// fails before Build or if T is not the registered element type.
func View[T Element](g *Grad) ([]T, error) {
	b := g.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.built {
		return nil, b.argErr("View", invalid("View of %q before Build", g.name))
	}
	if dt := DTypeOf[T](); dt != g.dt {
		return nil, b.argErr("View", invalid("tensor %q holds %v, not %v", g.name, g.dt, dt))
	}
	if g.n == 0 {
		return []T{}, nil
	}
	if g.off < 0 || g.n > (len(g.bk.buf)-g.off)/g.dt.Size() {
		return nil, b.argErr("View", invalid("tensor %q lies outside its bucket", g.name))
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&g.bk.buf[g.off])), g.n), nil
}

// Build lays out the buckets (see Bucketer) and allocates their buffers.
// It is a collective on the Bucketer's communicator: every rank calls it,
// and ranks whose registrations differ fail with ErrMismatch.
func (b *Bucketer) Build(ctx context.Context) error {
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

	all := make([]int64, b.c.size)
	if err := AllGather(ctx, b.c, []int64{digest}, all); err != nil {
		return err
	}
	for r, d := range all {
		if d != digest {
			return &OpError{Op: "Bucketer.Build", Rank: b.c.rank, Peer: r, Err: fmt.Errorf(
				"%w: rank %d registered different tensors (layout digest %016x, this rank's %016x)", ErrMismatch, r, d, digest)}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	// The layout is the same on every rank, so every rank refuses a bucket
	// too big to address alike.
	for _, bk := range b.buckets {
		size := 0
		for _, g := range bk.members {
			if g.n > (maxElems-size)/g.dt.Size() {
				return b.argErr("Build", invalid("bucket %d overflows at tensor %q (%d elements)", bk.index, g.name, g.n))
			}
			size += g.n * g.dt.Size()
		}
	}
	for _, bk := range b.buckets {
		size := 0
		for _, g := range bk.members {
			g.off = size
			size += g.n * g.dt.Size()
		}
		words := make([]uint64, (size+7)/8) // 8-byte aligned for every element type
		if size > 0 {
			bk.buf = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
		}
		bk.contrib = make([]bool, len(bk.members))
		bk.ev = NewEvent("bucket " + strconv.Itoa(bk.index))
		bk.run = bk.reduce
	}
	b.built = true
	return nil
}

// layout forms the buckets. b.mu is held.
func (b *Bucketer) layout() {
	open := map[DType]*bucket{}
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
		sizes[bk] = satAdd(sizes[bk], g.n*g.dt.Size())
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

// satAdd is a+b for non-negative a and b, saturating at maxElems (Build
// refuses such a bucket).
func satAdd(a, b int) int {
	if b > maxElems-a {
		return maxElems
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
		put(int(bk.dt))
		put(len(bk.members))
		for _, g := range bk.members {
			put(g.index)
			put(g.n)
		}
	}
	put(int(b.op))
	return int64(h.Sum64() >> 1)
}

// Buckets describes the buckets, in launch order (nil before Build).
func (b *Bucketer) Buckets() []BucketInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.built {
		return nil
	}
	out := make([]BucketInfo, len(b.buckets))
	for i, bk := range b.buckets {
		names := make([]string, len(bk.members))
		for j, g := range bk.members {
			names[j] = g.name
		}
		out[i] = BucketInfo{Index: i, DType: bk.dt, Bytes: len(bk.buf), Tensors: names}
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

// Ready marks the tensor's contents final for this step. When that
// completes its bucket, the bucket (and any complete buckets after it) is
// launched. Ready fails if the tensor is already ready this step, or with
// ErrLate if its bucket was flushed without it.
func (g *Grad) Ready() error { return g.markReady(nil) }

// ReadyAfter is Ready for a tensor that will be final once e's current
// record completes (see Stream.WaitEvent): the caller need not wait for
// it; the bucket's reduction waits on the Bucketer's stream instead.
func (g *Grad) ReadyAfter(e *Event) error { return g.markReady(e) }

func (g *Grad) markReady(e *Event) error {
	b := g.b
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.closed:
		return b.argErr("Ready", ErrClosed)
	case !b.built:
		return b.argErr("Ready", invalid("Ready of %q before Build", g.name))
	case g.late:
		return b.argErr("Ready", fmt.Errorf("%w: %q (bucket %d)", ErrLate, g.name, g.bk.index))
	case g.ready:
		return b.argErr("Ready", invalid("%q marked ready twice in one step", g.name))
	}
	if e != nil {
		g.after, g.afterGen = e, e.e.Target()
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
			b.s.s.WaitRecord(&g.after.e, g.afterGen)
			g.after = nil
		}
	}
	if missing > 0 {
		b.logUnready(bk, missing)
	}
	if o := b.c.set.observer; o != nil && o.BucketLaunch != nil {
		o.BucketLaunch(BucketEvent{Comm: b.c.id, Rank: b.c.rank, Bucket: bk.index, Bytes: len(bk.buf),
			Tensors: len(bk.members), NotReady: missing, Flushed: b.flushing, At: clock.Or(b.clock).Now()})
	}
	b.s.Go(bk.run)
	b.s.RecordEvent(bk.ev)
}

// reduce runs on the stream: fill the buffer, reduce it, copy out.
func (bk *bucket) reduce(ctx context.Context) error {
	es := bk.dt.Size()
	for i, g := range bk.members {
		slot := bk.buf[g.off : g.off+g.n*es]
		switch {
		case !bk.contrib[i]:
			clear(slot)
		case g.user != nil:
			copy(slot, g.user)
		}
	}
	if err := bk.b.c.AllReduceBytes(ctx, bk.buf, bk.buf, bk.dt, bk.b.op); err != nil {
		return err
	}
	for _, g := range bk.members {
		if g.user != nil {
			copy(g.user, bk.buf[g.off:g.off+g.n*es])
		}
	}
	return nil
}

// Event returns the event that completes when the tensor's reduction of
// the current step is complete. It is re-armed (Reset) at the end of every
// Wait, so during a step it refers to that step's reduction even before
// the bucket is launched. Nil before Build.
func (g *Grad) Event() *Event {
	g.b.mu.Lock()
	defer g.b.mu.Unlock()
	if !g.b.built {
		return nil
	}
	return g.bk.ev
}

// Wait blocks until the tensor's reduction of the current step is
// complete and returns its error. The bucket must be launched for that to
// happen: call it after Ready (and Flush, if its bucket may not fill).
func (g *Grad) Wait(ctx context.Context) error {
	ev := g.Event()
	if ev == nil {
		return g.b.argErr("Grad.Wait", invalid("Wait on %q before Build", g.name))
	}
	return ev.Synchronize(ctx)
}

// Flush launches every bucket not launched yet this step, in order; their
// tensors not yet ready contribute zeros (see Bucketer). It does not wait.
func (b *Bucketer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.built && !b.closed {
		b.flushing = true
		b.advance()
	}
}

// Wait ends the step: it flushes (see Flush), waits until every bucket's
// reduction is complete, and makes every tensor not ready again for the
// next step. It returns the first error of a reduction or, unless
// BucketConfig.AllowUnused is set, an error wrapping ErrUnused naming the
// tensors never marked ready this step (they were reduced as zeros). If
// ctx ends first it returns its error and the step stays open: Wait may be
// called again.
func (b *Bucketer) Wait(ctx context.Context) error {
	b.mu.Lock()
	if !b.built || b.closed {
		b.mu.Unlock()
		if b.closed {
			return b.argErr("Wait", ErrClosed)
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

// Close releases the Bucketer and closes its stream if it made it. It
// does not wait: call Wait first to finish the step. If its own stream
// still holds reductions not yet started they are dropped, which aborts
// the communicator (see Stream). The events Grad.Event returned must not
// be used after Close.
func (b *Bucketer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
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
	if b.ownS {
		b.s.Close()
	}
	return nil
}

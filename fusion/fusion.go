// Package fusion fuses many tensors — gradients, typically — into few
// large AllReduce calls of an hcomm communicator, run asynchronously on an
// hcomm.Stream so that they overlap the computation of the tensors still
// to come. It is to an hcomm.Comm what PyTorch DDP's reducer is to a
// process group: a layer built on the communicator's collectives, streams
// and events.
//
// Register every tensor once, in the same order on every rank; call
// Build; then, every step, mark each tensor ready as soon as its contents
// are final, and call Wait at the end of the step (see Bucketer).
// Bucket contents and launch order depend only on the registration, never
// on timing, so results are bitwise reproducible. examples/ddp is a
// complete data-parallel training program built on it.
package fusion

import (
	"context"
	"errors"
	"strconv"
	"time"
	"unsafe"

	"github.com/hcomm-go/hcomm"
	"github.com/hcomm-go/hcomm/internal/argcheck"
	ifusion "github.com/hcomm-go/hcomm/internal/fusion"
	"github.com/hcomm-go/hcomm/internal/stream"
)

// DefaultThreshold is the fusion threshold a Bucketer uses when
// Config.Threshold is zero. Measured on two ranks (BenchmarkBucketSize
// in process; hcomm perf over shared memory and TCP), AllReduce reaches its
// full bandwidth from about 1–4 MiB up, so any size in the usual 25–64 MiB
// range loses nothing there. Bigger buckets pay off with many ranks on fast
// networks, where each of a ring's 2(n−1) steps carries size/n bytes plus a
// fixed latency: with 8 ranks, 20 µs per step and 12.5 GB/s, 25 MiB keeps
// that latency near a tenth of the time. The low end of the range is chosen
// because the step's last bucket cannot overlap computation: its reduction
// is pure waiting, in proportion to its size.
const DefaultThreshold = 25 << 20

// Errors of a Bucketer's step. The errors Grad.Ready and Bucketer.Wait
// return wrap them (with the tensors' names); test with errors.Is.
var (
	// ErrLate reports that a tensor was marked ready after its bucket had
	// been flushed without it (see Bucketer).
	ErrLate = errors.New("hcomm: tensor marked ready after its bucket was flushed")

	// ErrUnused reports that a step ended (Bucketer.Wait) with tensors
	// never marked ready: they were reduced as zeros. Set
	// Config.AllowUnused when some tensors legitimately take no part in a
	// step.
	ErrUnused = errors.New("hcomm: tensors not marked ready in the step")
)

// The machinery (internal/fusion) reports these errors.
func init() { ifusion.ErrLate, ifusion.ErrUnused = ErrLate, ErrUnused }

// Config configures a Bucketer. Every rank must use the same values.
type Config struct {
	// Threshold is a bucket's target size in bytes: a bucket is closed
	// once its tensors reach it. Zero means DefaultThreshold.
	Threshold int

	// Window, if positive, bounds how long the bucket next in line waits
	// for its last tensors once its first one is ready; when it expires the
	// bucket is flushed with the tensors not yet ready contributing zeros.
	// Zero means: wait until every tensor of the bucket is ready (or Wait
	// or Flush is called).
	Window time.Duration

	// Op is the reduction. Zero means hcomm.Sum.
	Op hcomm.Op

	// Stream is the stream the reductions run on. Nil means a stream of
	// the Bucketer's own, closed by Close.
	Stream *hcomm.Stream

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
//	b := fusion.NewBucketer(c, fusion.Config{Op: hcomm.Avg})
//	g1, _ := fusion.Register(b, "layer1.w", w1grad)   // copied in and out
//	g2, _ := fusion.RegisterView[float32](b, "layer2.w", n2) // lives in the fusion buffer
//	if err := b.Build(ctx); err != nil { ... }
//	w2grad, _ := fusion.View[float32](g2)
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
//
// Each launch is reported to the communicator's hcomm.Observer
// (BucketLaunch) and, with HCOMM_TRACE, to its trace file.
type Bucketer struct {
	f      *ifusion.Bucketer
	s      *hcomm.Stream
	ownS   bool
	events []*hcomm.Event // per bucket, made by Build
}

// A Grad is a tensor registered with a Bucketer.
type Grad struct {
	g *ifusion.Grad
	b *Bucketer
}

// BucketInfo describes one bucket of a built Bucketer.
type BucketInfo struct {
	Index   int
	DType   hcomm.DType
	Bytes   int
	Tensors []string // names, in buffer order
}

// comm is a communicator as the Bucketer's machinery sees it.
type comm struct {
	c  *hcomm.Comm
	op hcomm.Op
}

func (v *comm) Rank() int { return v.c.Rank() }
func (v *comm) Size() int { return v.c.Size() }

func (v *comm) AllGather(ctx context.Context, d int64) ([]int64, error) {
	all := make([]int64, v.c.Size())
	return all, hcomm.AllGather(ctx, v.c, []int64{d}, all)
}

func (v *comm) AllReduce(ctx context.Context, buf []byte, dt int) error {
	return v.c.AllReduceBytes(ctx, buf, buf, hcomm.DType(dt), v.op)
}

func (v *comm) Launched(l ifusion.Launch) { ifusion.Root.Launched(v.c, l) }

// NewBucketer returns a Bucketer reducing with c. cfg's zero fields mean
// defaults.
func NewBucketer(c *hcomm.Comm, cfg Config) *Bucketer {
	op := cfg.Op
	if op == 0 {
		op = hcomm.Sum
	}
	thresh := cfg.Threshold
	if thresh <= 0 {
		thresh = DefaultThreshold
	}
	b := &Bucketer{s: cfg.Stream}
	fc := ifusion.Config{Threshold: thresh, Window: cfg.Window, Op: int(op), AllowUnused: cfg.AllowUnused,
		MaxElems: argcheck.MaxElems, DTypeName: func(dt int) string { return hcomm.DType(dt).String() }}
	rank := -1
	if c != nil {
		rank, fc.Log = c.Rank(), ifusion.Root.Log(c)
	}
	fc.Err = func(name string, peer int, err error) error {
		return &hcomm.OpError{Op: "Bucketer." + name, Rank: rank, Peer: peer, Err: err}
	}
	if b.s == nil && c != nil {
		b.s, b.ownS = c.NewStream("rank"+strconv.Itoa(rank)+"/bucketer"), true
	}
	var s ifusion.Stream
	if b.s != nil {
		s = ifusion.Root.Stream(b.s)
	}
	if c != nil {
		b.f = ifusion.New(&comm{c, op}, s, fc)
	} else {
		b.f = ifusion.New(nil, s, fc)
	}
	return b
}

// Stream returns the stream the reductions run on.
func (b *Bucketer) Stream() *hcomm.Stream { return b.s }

// Register adds tensor t under name (for messages and BucketInfo). Its
// contents are copied into the fusion buffer when its bucket is launched
// and the reduced values copied back; t must not be modified from Ready
// until the reduction is complete (Grad.Wait or Bucketer.Wait).
// Registration must happen before Build, in the same order on every rank.
func Register[T hcomm.Element](b *Bucketer, name string, t []T) (*Grad, error) {
	var user []byte
	if len(t) > 0 {
		user = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(t))), len(t)*int(unsafe.Sizeof(t[0])))
	}
	return b.register(name, hcomm.DTypeOf[T](), len(t), user)
}

// RegisterView adds a tensor of n elements that lives in the fusion
// buffer: after Build, View returns it, and it is reduced in place without
// copies.
func RegisterView[T hcomm.Element](b *Bucketer, name string, n int) (*Grad, error) {
	return b.register(name, hcomm.DTypeOf[T](), n, nil)
}

func (b *Bucketer) register(name string, dt hcomm.DType, n int, user []byte) (*Grad, error) {
	g, err := b.f.Register(name, int(dt), dt.Size(), n, user)
	if err != nil {
		return nil, err
	}
	return &Grad{g: g, b: b}, nil
}

// View returns the storage of a tensor registered with RegisterView (or,
// for one registered with Register, its slot in the fusion buffer). It
// fails before Build or if T is not the registered element type.
func View[T hcomm.Element](g *Grad) ([]T, error) {
	dt := hcomm.DTypeOf[T]()
	buf, err := g.g.View(int(dt))
	if err != nil {
		return nil, err
	}
	if len(buf) == 0 {
		return []T{}, nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&buf[0])), len(buf)/dt.Size()), nil
}

// Build lays out the buckets (see Bucketer) and allocates their buffers.
// It is a collective on the Bucketer's communicator: every rank calls it,
// and ranks whose registrations differ fail with hcomm.ErrMismatch.
func (b *Bucketer) Build(ctx context.Context) error {
	return b.f.Build(ctx, func(i int) *stream.Event {
		e := hcomm.NewEvent("bucket " + strconv.Itoa(i))
		b.events = append(b.events, e)
		return ifusion.Root.Event(e)
	})
}

// Buckets describes the buckets, in launch order (nil before Build).
func (b *Bucketer) Buckets() []BucketInfo {
	infos := b.f.Buckets()
	if infos == nil {
		return nil
	}
	out := make([]BucketInfo, len(infos))
	for i, in := range infos {
		out[i] = BucketInfo{Index: in.Index, DType: hcomm.DType(in.DType), Bytes: in.Bytes, Tensors: in.Tensors}
	}
	return out
}

// Name returns the name the tensor was registered under.
func (g *Grad) Name() string { return g.g.Name() }

// Bucket returns the index of the tensor's bucket (-1 before Build).
func (g *Grad) Bucket() int { return g.g.Bucket() }

// Ready marks the tensor's contents final for this step. When that
// completes its bucket, the bucket (and any complete buckets after it) is
// launched. Ready fails if the tensor is already ready this step, or with
// ErrLate if its bucket was flushed without it.
func (g *Grad) Ready() error { return g.g.Ready(nil) }

// ReadyAfter is Ready for a tensor that will be final once e's current
// record completes (see hcomm.Stream.WaitEvent): the caller need not wait
// for it; the bucket's reduction waits on the Bucketer's stream instead.
// A nil e is Ready.
func (g *Grad) ReadyAfter(e *hcomm.Event) error {
	if e == nil {
		return g.Ready()
	}
	return g.g.Ready(ifusion.Root.Event(e))
}

// Event returns the event that completes when the tensor's reduction of
// the current step is complete. It is re-armed (Reset) at the end of every
// Wait, so during a step it refers to that step's reduction even before
// the bucket is launched. Nil before Build.
func (g *Grad) Event() *hcomm.Event {
	i := g.g.Bucket() // >= 0 once built, after Build made the events
	if i < 0 {
		return nil
	}
	return g.b.events[i]
}

// Wait blocks until the tensor's reduction of the current step is
// complete and returns its error. The bucket must be launched for that to
// happen: call it after Ready (and Flush, if its bucket may not fill).
func (g *Grad) Wait(ctx context.Context) error { return g.g.Wait(ctx) }

// Flush launches every bucket not launched yet this step, in order; their
// tensors not yet ready contribute zeros (see Bucketer). It does not wait.
func (b *Bucketer) Flush() { b.f.Flush() }

// Wait ends the step: it flushes (see Flush), waits until every bucket's
// reduction is complete, and makes every tensor not ready again for the
// next step. It returns the first error of a reduction or, unless
// Config.AllowUnused is set, an error wrapping ErrUnused naming the
// tensors never marked ready this step (they were reduced as zeros). If
// ctx ends first it returns its error and the step stays open: Wait may be
// called again.
func (b *Bucketer) Wait(ctx context.Context) error { return b.f.Wait(ctx) }

// Close releases the Bucketer and closes its stream if it made it. It
// does not wait: call Wait first to finish the step. If its own stream
// still holds reductions not yet started they are dropped, which aborts
// the communicator (see hcomm.Stream). The events Grad.Event returned must
// not be used after Close.
func (b *Bucketer) Close() error {
	if b.f.Close() && b.ownS {
		b.s.Close()
	}
	return nil
}

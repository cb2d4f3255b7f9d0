package fusion

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm"
	"github.com/hcomm-go/hcomm/internal/clock"
)

// tensorSpec is one tensor of a random set.
type tensorSpec struct {
	dt   hcomm.DType
	n    int
	view bool
}

// tensor holds a tensor's data whatever its element type.
type anyTensor struct {
	f32 []float32
	f64 []float64
	i32 []int32
	h16 []hcomm.Float16
}

func randomSpecs(rng *rand.Rand, count int) []tensorSpec {
	dts := []hcomm.DType{hcomm.DTypeFloat32, hcomm.DTypeFloat64, hcomm.DTypeInt32, hcomm.DTypeFloat16}
	specs := make([]tensorSpec, count)
	for i := range specs {
		n := rng.IntN(300)
		if rng.IntN(10) == 0 {
			n = rng.IntN(5000)
		}
		specs[i] = tensorSpec{dt: dts[rng.IntN(len(dts))], n: n, view: rng.IntN(3) == 0}
	}
	return specs
}

// fill gives tensor i of rank r pseudo-random contents. With exact, the
// floating-point values are small multiples of 1/8, whose sums over a few
// ranks are exact in every summation order.
func fillTensor(tn *anyTensor, spec tensorSpec, seed uint64, exact bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	val := func() float64 {
		if exact {
			return float64(rng.IntN(2001)-1000) / 8
		}
		return rng.NormFloat64() * math.Exp2(float64(rng.IntN(40)-20))
	}
	switch spec.dt {
	case hcomm.DTypeFloat32:
		for i := range tn.f32 {
			tn.f32[i] = float32(val())
		}
	case hcomm.DTypeFloat64:
		for i := range tn.f64 {
			tn.f64[i] = val()
		}
	case hcomm.DTypeInt32:
		for i := range tn.i32 {
			tn.i32[i] = int32(rng.Uint32())
		}
	case hcomm.DTypeFloat16:
		for i := range tn.h16 {
			v := val()
			if exact {
				v /= 16
			}
			tn.h16[i] = hcomm.Float16From(float32(v))
		}
	}
}

func (tn *anyTensor) bytes() []byte {
	switch {
	case tn.f32 != nil:
		return bytesOf(tn.f32)
	case tn.f64 != nil:
		return bytesOf(tn.f64)
	case tn.i32 != nil:
		return bytesOf(tn.i32)
	case tn.h16 != nil:
		return bytesOf(tn.h16)
	}
	return nil
}

func makeTensor(spec tensorSpec) *anyTensor {
	tn := &anyTensor{}
	switch spec.dt {
	case hcomm.DTypeFloat32:
		tn.f32 = make([]float32, spec.n)
	case hcomm.DTypeFloat64:
		tn.f64 = make([]float64, spec.n)
	case hcomm.DTypeInt32:
		tn.i32 = make([]int32, spec.n)
	case hcomm.DTypeFloat16:
		tn.h16 = make([]hcomm.Float16, spec.n)
	}
	return tn
}

// registerSpec registers tn (copy) or a view of its size, returning the
// handle and the storage the test writes gradients into.
func registerSpec(b *Bucketer, name string, spec tensorSpec, tn *anyTensor) (*Grad, error) {
	switch spec.dt {
	case hcomm.DTypeFloat32:
		if spec.view {
			return RegisterView[float32](b, name, spec.n)
		}
		return Register(b, name, tn.f32)
	case hcomm.DTypeFloat64:
		if spec.view {
			return RegisterView[float64](b, name, spec.n)
		}
		return Register(b, name, tn.f64)
	case hcomm.DTypeInt32:
		if spec.view {
			return RegisterView[int32](b, name, spec.n)
		}
		return Register(b, name, tn.i32)
	default:
		if spec.view {
			return RegisterView[hcomm.Float16](b, name, spec.n)
		}
		return Register(b, name, tn.h16)
	}
}

// bindView points a view tensor's storage at its slot in the fusion
// buffer.
func bindView(g *Grad, spec tensorSpec, tn *anyTensor) error {
	if !spec.view {
		return nil
	}
	var err error
	switch spec.dt {
	case hcomm.DTypeFloat32:
		tn.f32, err = View[float32](g)
	case hcomm.DTypeFloat64:
		tn.f64, err = View[float64](g)
	case hcomm.DTypeInt32:
		tn.i32, err = View[int32](g)
	default:
		tn.h16, err = View[hcomm.Float16](g)
	}
	if spec.n == 0 { // keep the zero-length tensor typed
		*tn = *makeTensor(spec)
	}
	return err
}

// runBucketed reduces a random tensor set through a Bucketer for steps
// steps, each rank marking tensors ready in its own random order, and
// returns every rank's results of the last step.
func runBucketed(t *testing.T, n int, specs []tensorSpec, op hcomm.Op, exact bool, thresh, steps int, orderSeed uint64) [][][]byte {
	t.Helper()
	results := make([][][]byte, n)
	ctx := context.Background()
	onLocalRanks(t, n, &hcomm.Config{Timeout: time.Minute}, func(c *hcomm.Comm) error {
		r := c.Rank()
		b := NewBucketer(c, Config{Threshold: thresh, Op: op})
		defer b.Close()
		tns := make([]*anyTensor, len(specs))
		gs := make([]*Grad, len(specs))
		for i, sp := range specs {
			tns[i] = makeTensor(sp)
			g, err := registerSpec(b, fmt.Sprint("t", i), sp, tns[i])
			if err != nil {
				return err
			}
			gs[i] = g
		}
		if err := b.Build(ctx); err != nil {
			return err
		}
		for i, sp := range specs {
			if err := bindView(gs[i], sp, tns[i]); err != nil {
				return err
			}
		}
		rng := rand.New(rand.NewPCG(orderSeed, uint64(r)))
		for step := range steps {
			order := rng.Perm(len(specs))
			for _, i := range order {
				fillTensor(tns[i], specs[i], uint64(step*1000003+i*101+r), exact)
				if err := gs[i].Ready(); err != nil {
					return err
				}
				if rng.IntN(8) == 0 {
					time.Sleep(time.Duration(rng.IntN(200)) * time.Microsecond)
				}
			}
			if err := b.Wait(ctx); err != nil {
				return err
			}
		}
		res := make([][]byte, len(specs))
		for i := range specs {
			res[i] = slices.Clone(tns[i].bytes())
		}
		results[r] = res
		return nil
	})
	return results
}

// runUnfused reduces the same tensors (the last step's contents) one
// AllReduce each.
func runUnfused(t *testing.T, n int, specs []tensorSpec, op hcomm.Op, exact bool, step int) [][][]byte {
	t.Helper()
	results := make([][][]byte, n)
	ctx := context.Background()
	onLocalRanks(t, n, &hcomm.Config{Timeout: time.Minute}, func(c *hcomm.Comm) error {
		r := c.Rank()
		res := make([][]byte, len(specs))
		for i, sp := range specs {
			tn := makeTensor(sp)
			fillTensor(tn, sp, uint64(step*1000003+i*101+r), exact)
			buf := tn.bytes()
			if err := c.AllReduceBytes(ctx, buf, buf, sp.dt, op); err != nil {
				return err
			}
			res[i] = buf
		}
		results[r] = res
		return nil
	})
	return results
}

// The Bucketer's results equal one AllReduce per tensor, bit for bit, for
// random tensor sets and arrival orders.
func TestBucketerMatchesUnfused(t *testing.T) {
	for trial := range 6 {
		n := 2 + trial%3
		exact := n > 2 // with two ranks every sum is exact in any order
		rng := rand.New(rand.NewPCG(uint64(trial), 1))
		specs := randomSpecs(rng, 5+rng.IntN(40))
		thresh := []int{64, 1000, 4096, 1 << 20}[trial%4]
		op := []hcomm.Op{hcomm.Sum, hcomm.Avg, hcomm.Max}[trial%3]
		t.Run(fmt.Sprintf("n=%d/tensors=%d/thresh=%d/%v", n, len(specs), thresh, op), func(t *testing.T) {
			const steps = 3
			got := runBucketed(t, n, specs, op, exact, thresh, steps, uint64(trial))
			want := runUnfused(t, n, specs, op, exact, steps-1)
			for r := range n {
				for i := range specs {
					if !slices.Equal(got[r][i], want[r][i]) {
						t.Fatalf("rank %d tensor %d (%v×%d, view %v): bucketed result differs from unfused AllReduce",
							r, i, specs[i].dt, specs[i].n, specs[i].view)
					}
				}
			}
		})
	}
}

// Arbitrary floating-point data, where the summation order matters: the
// results are bitwise identical on every rank and whatever the arrival
// order.
func TestBucketerDeterministic(t *testing.T) {
	const n = 3
	rng := rand.New(rand.NewPCG(99, 1))
	specs := randomSpecs(rng, 30)
	a := runBucketed(t, n, specs, hcomm.Sum, false, 2048, 2, 1)
	b := runBucketed(t, n, specs, hcomm.Sum, false, 2048, 2, 2)
	for r := range n {
		for i := range specs {
			if !slices.Equal(a[r][i], a[0][i]) {
				t.Fatalf("tensor %d differs between rank 0 and rank %d", i, r)
			}
			if !slices.Equal(a[r][i], b[r][i]) {
				t.Fatalf("rank %d tensor %d differs between two arrival orders", r, i)
			}
		}
	}
}

// A bucket flushed by its window reduces what is ready, zeros for the rest,
// on every rank; a late Ready fails with ErrLate.
func TestBucketerWindow(t *testing.T) {
	ctx := context.Background()
	onLocalRanks(t, 2, &hcomm.Config{Timeout: time.Minute}, func(c *hcomm.Comm) error {
		b := NewBucketer(c, Config{Threshold: 1 << 20, Window: 30 * time.Millisecond, AllowUnused: true})
		clk := clock.NewFake()
		b.f.SetClock(clk)
		defer b.Close()
		x := []float64{1, 2}
		y := []float64{10, 20}
		gx, _ := Register(b, "x", x)
		gy, _ := Register(b, "y", y)
		if err := b.Build(ctx); err != nil {
			return err
		}
		if err := gy.Ready(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			if err := gx.Ready(); err != nil {
				return err
			}
		}
		// Rank 1 never marks x ready: its bucket flushes when the window
		// expires.
		if c.Rank() == 1 {
			clk.Advance(30 * time.Millisecond)
		}
		if err := gx.Wait(ctx); err != nil {
			return err
		}
		if c.Rank() == 1 {
			if err := gx.Ready(); !errors.Is(err, ErrLate) {
				return fmt.Errorf("late Ready = %v, want ErrLate", err)
			}
		}
		if err := b.Wait(ctx); err != nil {
			return err
		}
		if want := []float64{1, 2}; !slices.Equal(x, want) { // rank 1 contributed zeros
			return fmt.Errorf("rank %d x = %v, want %v", c.Rank(), x, want)
		}
		if want := []float64{20, 40}; !slices.Equal(y, want) {
			return fmt.Errorf("rank %d y = %v, want %v", c.Rank(), y, want)
		}
		// The next step starts afresh.
		x[0], x[1] = 1, 1
		if err := gx.Ready(); err != nil {
			return err
		}
		if err := gy.Ready(); err != nil {
			return err
		}
		if err := b.Wait(ctx); err != nil {
			return err
		}
		if want := []float64{2, 2}; !slices.Equal(x, want) {
			return fmt.Errorf("step 2: rank %d x = %v, want %v", c.Rank(), x, want)
		}
		return nil
	})
}

// ReadyAfter lets the compute stream produce a gradient while the caller
// moves on; the reduction waits for it on the Bucketer's stream, and the
// compute stream can wait for the reduction through Grad.Event.
func TestBucketerReadyAfter(t *testing.T) {
	ctx := context.Background()
	onLocalRanks(t, 2, &hcomm.Config{Timeout: time.Minute}, func(c *hcomm.Comm) error {
		compute := c.NewStream("compute")
		defer compute.Close()
		b := NewBucketer(c, Config{Op: hcomm.Avg})
		defer b.Close()
		g, _ := RegisterView[float32](b, "w", 4)
		if err := b.Build(ctx); err != nil {
			return err
		}
		w, _ := View[float32](g)
		for step := range 3 {
			compute.Go(func(context.Context) error {
				time.Sleep(5 * time.Millisecond)
				for i := range w {
					w[i] = float32(c.Rank()*10 + i + step)
				}
				return nil
			})
			e := compute.Record()
			if err := g.ReadyAfter(e); err != nil {
				return err
			}
			e.Release()
			var seen []float32
			compute.WaitEvent(g.Event())
			compute.Go(func(context.Context) error { seen = slices.Clone(w); return nil })
			if err := errors.Join(b.Wait(ctx), compute.Synchronize(ctx)); err != nil {
				return err
			}
			want := []float32{5 + float32(step), 6 + float32(step), 7 + float32(step), 8 + float32(step)}
			if !slices.Equal(seen, want) {
				return fmt.Errorf("rank %d step %d: compute stream saw %v, want %v", c.Rank(), step, seen, want)
			}
		}
		return nil
	})
}

func TestBucketerMisuse(t *testing.T) {
	ctx := context.Background()
	onLocalRanks(t, 2, &hcomm.Config{Timeout: time.Minute}, func(c *hcomm.Comm) error {
		b := NewBucketer(c, Config{})
		defer b.Close()
		g, _ := Register(b, "a", make([]int32, 3))
		if err := g.Ready(); !errors.Is(err, hcomm.ErrInvalidArgument) {
			return fmt.Errorf("Ready before Build: %v", err)
		}
		if _, err := View[int32](g); !errors.Is(err, hcomm.ErrInvalidArgument) {
			return fmt.Errorf("View before Build: %v", err)
		}
		if c.Rank() == 1 {
			Register(b, "extra", make([]int32, 1))
		}
		if err := b.Build(ctx); !errors.Is(err, hcomm.ErrMismatch) {
			return fmt.Errorf("Build with different registrations: %v, want ErrMismatch", err)
		}
		b2 := NewBucketer(c, Config{})
		defer b2.Close()
		g2, _ := Register(b2, "a", make([]int32, 3))
		if err := b2.Build(ctx); err != nil {
			return err
		}
		if _, err := Register(b2, "late", make([]int32, 1)); !errors.Is(err, hcomm.ErrInvalidArgument) {
			return fmt.Errorf("Register after Build: %v", err)
		}
		if _, err := View[float32](g2); !errors.Is(err, hcomm.ErrInvalidArgument) {
			return fmt.Errorf("View with the wrong type: %v", err)
		}
		if err := g2.Ready(); err != nil {
			return err
		}
		if err := g2.Ready(); !errors.Is(err, hcomm.ErrInvalidArgument) {
			return fmt.Errorf("double Ready: %v", err)
		}
		return b2.Wait(ctx)
	})
}

// BenchmarkBucketSize measures AllReduce over two local ranks by message
// size, the data behind DefaultThreshold.
func BenchmarkBucketSize(b *testing.B) {
	for _, mib := range []int{1, 4, 8, 16, 25, 32, 64} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			n := mib << 20 / 4
			ctx := context.Background()
			comms, err := hcomm.NewLocal(ctx, 2, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer comms[1].Close()
			defer comms[0].Close()
			bufs := [][]float32{make([]float32, n), make([]float32, n)}
			b.SetBytes(int64(n * 4))
			b.ResetTimer()
			for range b.N {
				var wg sync.WaitGroup
				for r, c := range comms {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := hcomm.AllReduce(ctx, c, bufs[r], bufs[r], hcomm.Sum); err != nil {
							b.Error(err)
						}
					}()
				}
				wg.Wait()
			}
		})
	}
}

// bothRanks runs body(rank) on both ranks of comms concurrently.
func bothRanks(b *testing.B, comms []*hcomm.Comm, body func(r int) error) {
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := body(r); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkFusion compares 1000 small tensors reduced by 1000 AllReduce
// calls with the same tensors fused by a Bucketer, on two local ranks.
func BenchmarkFusion(b *testing.B) {
	const tensors, elems = 1000, 64 // 256 bytes each
	ctx := context.Background()
	comms, err := hcomm.NewLocal(ctx, 2, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer comms[1].Close()
	defer comms[0].Close()
	data := make([][][]float32, 2)
	bks := make([]*Bucketer, 2)
	gs := make([][]*Grad, 2)
	for r, c := range comms {
		bks[r] = NewBucketer(c, Config{})
		defer bks[r].Close()
		for i := range tensors {
			t := make([]float32, elems)
			data[r] = append(data[r], t)
			g, _ := Register(bks[r], fmt.Sprint(i), t)
			gs[r] = append(gs[r], g)
		}
	}
	bothRanks(b, comms, func(r int) error { return bks[r].Build(ctx) })
	var separate, fused time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		bothRanks(b, comms, func(r int) error {
			for _, t := range data[r] {
				if err := hcomm.AllReduce(ctx, comms[r], t, t, hcomm.Sum); err != nil {
					return err
				}
			}
			return nil
		})
		separate += time.Since(start)
		start = time.Now()
		bothRanks(b, comms, func(r int) error {
			for i := len(gs[r]) - 1; i >= 0; i-- {
				if err := gs[r][i].Ready(); err != nil {
					return err
				}
			}
			return bks[r].Wait(ctx)
		})
		fused += time.Since(start)
	}
	b.ReportMetric(float64(separate.Microseconds())/float64(b.N), "separate-µs")
	b.ReportMetric(float64(fused.Microseconds())/float64(b.N), "fused-µs")
	b.ReportMetric(float64(separate)/float64(fused), "speedup")
}

// BenchmarkOverlap runs a training-like step on two local ranks: L chunks
// of computation, each producing one gradient tensor, and an AllReduce of
// all the gradients (one bucket per tensor, 64 MiB in all); the
// computation is calibrated to take as long as the communication. "serial" reduces after the whole computation;
// "overlapped" marks each gradient ready as soon as it is computed, so its
// bucket is reduced on the stream while the next chunk computes. The
// computation is either an accelerator kernel the host only waits for
// ("device", a sleep) or host work ("cpu", a busy loop competing with the
// reduction for the machine's cores). Reported: the time of computation
// alone, of communication alone, of the serial and the overlapped step,
// and overlapped/serial.
func BenchmarkOverlap(b *testing.B) {
	const layers = 8
	elems := 2 << 20 // per layer: 8 MiB of float32
	if testing.Short() {
		elems >>= 3
	}
	for _, kind := range []string{"device", "cpu"} {
		b.Run(kind, func(b *testing.B) {
			ctx := context.Background()
			comms, err := hcomm.NewLocal(ctx, 2, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer comms[1].Close()
			defer comms[0].Close()
			bks := make([]*Bucketer, 2)
			gs := make([][]*Grad, 2)
			for r, c := range comms {
				bks[r] = NewBucketer(c, Config{Threshold: 4 * elems})
				defer bks[r].Close()
				for i := range layers {
					g, _ := RegisterView[float32](bks[r], fmt.Sprint("layer", i), elems)
					gs[r] = append(gs[r], g)
				}
			}
			bothRanks(b, comms, func(r int) error { return bks[r].Build(ctx) })
			var chunk time.Duration
			work := func() {
				if kind == "device" {
					time.Sleep(chunk)
					return
				}
				for t := time.Now(); time.Since(t) < chunk; {
				}
			}
			// step runs one step; compute and communicate say what it does.
			step := func(compute, communicate, overlap bool) time.Duration {
				start := time.Now()
				bothRanks(b, comms, func(r int) error {
					for i := layers - 1; i >= 0; i-- { // backward: last layer first
						if compute {
							work()
						}
						if communicate && overlap {
							if err := gs[r][i].Ready(); err != nil {
								return err
							}
						}
					}
					if !communicate {
						return nil
					}
					if !overlap {
						for i := layers - 1; i >= 0; i-- {
							if err := gs[r][i].Ready(); err != nil {
								return err
							}
						}
					}
					return bks[r].Wait(ctx)
				})
				return time.Since(start)
			}
			step(false, true, false) // warm up
			calib := []time.Duration{step(false, true, false), step(false, true, false), step(false, true, false)}
			slices.Sort(calib)
			chunk = calib[1] / layers
			var comp, comm, serial, overlapped time.Duration
			b.ResetTimer()
			for range b.N {
				comp += step(true, false, false)
				comm += step(false, true, false)
				serial += step(true, true, false)
				overlapped += step(true, true, true)
			}
			ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N) }
			b.ReportMetric(ms(comp), "compute-ms")
			b.ReportMetric(ms(comm), "comm-ms")
			b.ReportMetric(ms(serial), "serial-ms")
			b.ReportMetric(ms(overlapped), "overlap-ms")
			b.ReportMetric(float64(overlapped)/float64(serial), "overlap/serial")
		})
	}
}

// TestObserverBucketLaunch: each bucket launch reaches the Observer,
// saying how many of its tensors were not ready and what launched it.
func TestObserverBucketLaunch(t *testing.T) {
	var mu sync.Mutex
	var got []hcomm.BucketEvent
	obs := &hcomm.Observer{BucketLaunch: func(e hcomm.BucketEvent) { mu.Lock(); got = append(got, e); mu.Unlock() }}
	onLocalRanks(t, 2, &hcomm.Config{Timeout: time.Minute, Observer: obs}, func(c *hcomm.Comm) error {
		ctx := context.Background()
		b := NewBucketer(c, Config{Threshold: 1 << 20, AllowUnused: true})
		defer b.Close()
		x, y := []float64{1, 2}, []float64{3, 4}
		gx, _ := Register(b, "x", x)
		gy, _ := Register(b, "y", y)
		if err := b.Build(ctx); err != nil {
			return err
		}
		if err := gy.Ready(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			if err := gx.Ready(); err != nil {
				return err
			}
		}
		return b.Wait(ctx)
	})
	if len(got) != 2 {
		t.Fatalf("%d launches, want 2: %+v", len(got), got)
	}
	for _, e := range got {
		want := hcomm.BucketEvent{Comm: "local", Rank: e.Rank, Bucket: 0, Bytes: 32, Tensors: 2, At: e.At}
		if e.Rank == 1 {
			want.NotReady, want.Flushed = 1, true
		}
		if e != want || e.At.IsZero() {
			t.Errorf("got %+v, want %+v", e, want)
		}
	}
}

// A view too big to address is refused at registration, and a bucket
// whose tensors together overflow is refused by Build on every rank, never
// a View longer than its buffer (issue 11 item 7).
func TestBucketerSizeOverflow(t *testing.T) {
	ctx := context.Background()
	onLocalRanks(t, 1, nil, func(c *hcomm.Comm) error {
		b := NewBucketer(c, Config{})
		defer b.Close()
		if _, err := RegisterView[float64](b, "huge", 1<<60); !errors.Is(err, hcomm.ErrInvalidArgument) {
			t.Errorf("RegisterView of 2^60 float64: err = %v, want ErrInvalidArgument", err)
		}
		return nil
	})
	onLocalRanks(t, 2, nil, func(c *hcomm.Comm) error {
		b := NewBucketer(c, Config{})
		defer b.Close()
		var gs []*Grad
		for _, name := range []string{"a", "b", "c"} {
			g, err := RegisterView[float64](b, name, math.MaxInt/8/2)
			if err != nil {
				return err
			}
			gs = append(gs, g)
		}
		if err := b.Build(ctx); !errors.Is(err, hcomm.ErrInvalidArgument) {
			t.Errorf("Build of a bucket past MaxInt bytes: err = %v, want ErrInvalidArgument", err)
		}
		for _, g := range gs {
			if v, err := View[float64](g); err == nil {
				t.Errorf("View of %q in an unbuilt bucket: %d elements, want an error", g.Name(), len(v))
			}
		}
		return nil
	})
}

// A tensor never marked ready in a step makes Wait fail with ErrUnused
// naming it, on the rank that forgot it; AllowUnused lets it contribute
// zeros silently, as DDP's find_unused_parameters (issue 11 item 16).
func TestBucketerUnused(t *testing.T) {
	ctx := context.Background()
	for _, allow := range []bool{false, true} {
		onLocalRanks(t, 2, nil, func(c *hcomm.Comm) error {
			b := NewBucketer(c, Config{AllowUnused: allow})
			defer b.Close()
			x := []float32{1, 2}
			y := []float32{3}
			gx, err := Register(b, "x", x)
			if err != nil {
				return err
			}
			gy, err := Register(b, "y", y)
			if err != nil {
				return err
			}
			if err := b.Build(ctx); err != nil {
				return err
			}
			if err := gx.Ready(); err != nil {
				return err
			}
			if c.Rank() == 0 {
				if err := gy.Ready(); err != nil {
					return err
				}
			}
			err = b.Wait(ctx)
			switch {
			case c.Rank() == 1 && !allow:
				if !errors.Is(err, ErrUnused) || !strings.Contains(err.Error(), `"y"`) {
					t.Errorf("rank 1, y never ready: Wait = %v, want ErrUnused naming \"y\"", err)
				}
			case err != nil:
				t.Errorf("rank %d (AllowUnused %v): Wait = %v", c.Rank(), allow, err)
			}
			if y[0] != 3 || x[0] != 2 {
				t.Errorf("rank %d: x = %v, y = %v, want [2 4] and [3] (y's missing part reduced as zero)", c.Rank(), x, y)
			}
			// The next step with every tensor ready is clean.
			if err := errors.Join(gx.Ready(), gy.Ready(), b.Wait(ctx)); err != nil {
				t.Errorf("rank %d: next step: %v", c.Rank(), err)
			}
			return nil
		})
	}
}

// TestBucketUnreadyWarn: a bucket launched with a tensor not ready is
// reported at WARN the first time, at DEBUG after that.
func TestBucketUnreadyWarn(t *testing.T) {
	ctx := context.Background()
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	onLocalRanks(t, 2, &hcomm.Config{Timeout: time.Minute, Logger: log}, func(c *hcomm.Comm) error {
		b := NewBucketer(c, Config{Threshold: 1 << 20, AllowUnused: true})
		defer b.Close()
		x, y := []float64{1, 2}, []float64{3, 4}
		gx, _ := Register(b, "x", x)
		gy, _ := Register(b, "y", y)
		if err := b.Build(ctx); err != nil {
			return err
		}
		for range 2 {
			if err := gy.Ready(); err != nil {
				return err
			}
			if c.Rank() == 0 {
				if err := gx.Ready(); err != nil {
					return err
				}
			}
			if err := b.Wait(ctx); err != nil { // rank 1 flushes without x
				return err
			}
		}
		return nil
	})
	out := logs.String()
	for _, w := range []string{
		`level=WARN msg="hcomm: bucket launched with tensors not ready; they contribute zeros (later launches of this bucket like this one are logged at DEBUG)" rank=1 bucket=0 not_ready=1 tensors=2 names=x by="Flush or Wait"`,
		`level=DEBUG msg="hcomm: bucket launched with tensors not ready; they contribute zeros" rank=1 bucket=0 not_ready=1`,
	} {
		if strings.Count(out, w) != 1 {
			t.Errorf("the log does not hold once %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "rank=0 bucket=0 not_ready") {
		t.Errorf("rank 0, whose tensors were all ready, warned:\n%s", out)
	}
}

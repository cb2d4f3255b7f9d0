package copyeng

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRingWrapAround(t *testing.T) {
	r := newRing(4)
	var claim atomic.Uint64
	ds := make([]Desc, 3)
	for lap := range 1000 {
		for i := range ds {
			if !r.push(&ds[i]) {
				t.Fatalf("lap %d: push %d failed on a ring of %d", lap, i, r.cap())
			}
		}
		for i := range ds {
			if d := r.pop(&claim); d != &ds[i] {
				t.Fatalf("lap %d: pop %d returned the wrong descriptor", lap, i)
			}
		}
		if r.pop(&claim) != nil {
			t.Fatalf("lap %d: pop from an empty ring returned a descriptor", lap)
		}
	}
	if got := r.enq.Load(); got != 3000 {
		t.Fatalf("producer position %d, want 3000", got)
	}
}

func TestRingFull(t *testing.T) {
	r := newRing(8)
	ds := make([]Desc, 9)
	for i := range 8 {
		if !r.push(&ds[i]) {
			t.Fatalf("push %d of 8 failed", i)
		}
	}
	if !r.full() || r.push(&ds[8]) {
		t.Fatal("a full ring accepted a ninth descriptor")
	}
	var claim atomic.Uint64
	if r.pop(&claim) != &ds[0] {
		t.Fatal("pop did not return the oldest")
	}
	if !r.push(&ds[8]) {
		t.Fatal("push failed after a pop made room")
	}
}

// Several producers and consumers: every descriptor is taken exactly once.
func TestRingMPMC(t *testing.T) {
	const producers, per = 4, 5000
	r := newRing(16)
	ds := make([]Desc, producers*per)
	seen := make([]atomic.Int32, len(ds))
	index := make(map[*Desc]int, len(ds))
	for i := range ds {
		index[&ds[i]] = i
	}
	var wg sync.WaitGroup
	var taken atomic.Int64
	for p := range producers {
		wg.Go(func() {
			for i := p * per; i < (p+1)*per; i++ {
				for !r.push(&ds[i]) {
					runtime.Gosched()
				}
			}
		})
	}
	for range 3 {
		wg.Go(func() {
			var claim atomic.Uint64
			for taken.Load() < int64(len(ds)) {
				d := r.pop(&claim)
				if d == nil {
					runtime.Gosched()
					continue
				}
				seen[index[d]].Add(1)
				taken.Add(1)
			}
		})
	}
	wg.Wait()
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Fatalf("descriptor %d taken %d times", i, n)
		}
	}
}

func TestSpan(t *testing.T) {
	for _, tc := range []struct {
		rows, n, pitch, off, size int
		ok                        bool
	}{
		{1, 10, 0, 0, 10, true},
		{1, 10, 0, 1, 10, false},
		{1, 0, 0, 10, 10, true},
		{1, 0, 0, 11, 10, false},
		{3, 4, 8, 0, 20, true},
		{3, 4, 8, 1, 20, false},
		{3, 4, 2, 0, 100, false}, // rows overlap
		{2, 1, 1 << 62, 0, 100, false},
		{1 << 40, 1 << 40, 1 << 40, 0, 1 << 62, false},
		{1, -1, 0, 0, 10, false},
		{1, 1, 0, -1, 10, false},
	} {
		if got := InBounds(tc.off, tc.rows, tc.n, tc.pitch, tc.size); got != tc.ok {
			t.Errorf("InBounds(off %d, rows %d, n %d, pitch %d, size %d) = %v, want %v",
				tc.off, tc.rows, tc.n, tc.pitch, tc.size, got, tc.ok)
		}
	}
}

func TestCopy(t *testing.T) {
	e := New(&Config{Workers: 2})
	defer e.Close()
	ctx := context.Background()
	src := make([]byte, 64)
	for i := range src {
		src[i] = byte(i + 1)
	}
	for _, tc := range []struct {
		name string
		d    *Desc
		want Status
		dst  []byte // expected destination (16 bytes)
	}{
		{"contiguous", &Desc{SrcOff: 2, DstOff: 1, Len: 4}, OK,
			[]byte{0, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
		{"strided", &Desc{SrcOff: 0, Len: 2, Rows: 3, SrcPitch: 10, DstPitch: 4}, OK,
			[]byte{1, 2, 0, 0, 11, 12, 0, 0, 21, 22, 0, 0, 0, 0, 0, 0}},
		{"empty", &Desc{SrcOff: 64, DstOff: 16}, OK, make([]byte, 16)},
		{"dst out of bounds", &Desc{DstOff: 13, Len: 4}, OutOfBounds, make([]byte, 16)},
		{"src out of bounds", &Desc{SrcOff: 62, Len: 4}, OutOfBounds, make([]byte, 16)},
		{"strided out of bounds", &Desc{Len: 2, Rows: 5, SrcPitch: 1, DstPitch: 4}, OutOfBounds, make([]byte, 16)},
		{"negative", &Desc{SrcOff: -1, Len: 1}, OutOfBounds, make([]byte, 16)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := make([]byte, 32) // dst is the first half; the rest must stay zero
			d := tc.d
			d.Src, d.Dst = src, mem[:16]
			if _, err := e.Post(ctx, d); err != nil {
				t.Fatal(err)
			}
			err := e.Wait(ctx, d)
			if d.Status() != tc.want {
				t.Fatalf("status %v, want %v (err %v)", d.Status(), tc.want, err)
			}
			if (err == nil) != (tc.want == OK) {
				t.Fatalf("err %v for status %v", err, d.Status())
			}
			if !bytes.Equal(mem[:16], tc.dst) || !bytes.Equal(mem[16:], make([]byte, 16)) {
				t.Fatalf("memory %v, want %v and zeros", mem, tc.dst)
			}
		})
	}
}

// gate is a Mover that blocks until released.
type gate struct {
	started chan struct{}
	release chan struct{}
}

func newGate() *gate { return &gate{make(chan struct{}, 1), make(chan struct{})} }

func (g *gate) Move(*Desc) Status {
	g.started <- struct{}{}
	<-g.release
	return OK
}

func TestFullQueue(t *testing.T) {
	e := New(&Config{Workers: 1, Depth: 2})
	defer e.Close()
	ctx := context.Background()
	g := newGate()
	block := &Desc{Mover: g}
	if _, err := e.Post(ctx, block); err != nil {
		t.Fatal(err)
	}
	<-g.started // the only worker is busy; the ring is empty
	fill := []*Desc{{}, {}}
	if n, err := e.Submit(ctx, fill...); n != 2 || err != nil {
		t.Fatalf("Submit into an empty ring of 2: %d, %v", n, err)
	}
	extra := []*Desc{{}, {}}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	n, err := e.Submit(short, extra...)
	cancel()
	if n != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Submit into a full ring: %d, %v; want 0 and a deadline error", n, err)
	}
	// A blocking Submit finishes once the worker makes room; nothing is lost.
	done := make(chan error, 1)
	go func() {
		_, err := e.Post(ctx, extra...)
		done <- err
	}()
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, d := range append(fill, extra...) {
		if err := e.Wait(ctx, d); err != nil {
			t.Fatalf("descriptor %d: %v", i, err)
		}
	}
	if got := e.Stats().Completed; got != 5 {
		t.Fatalf("%d completions, want 5", got)
	}
}

// waitIdle waits until the engine's workers all sleep.
func waitIdle(t *testing.T, e *Engine, workers int) {
	t.Helper()
	for e.Idle() < workers {
		runtime.Gosched()
	}
}

func TestDoorbellBatching(t *testing.T) {
	const rounds, batch = 50, 64
	e := New(&Config{Workers: 1})
	defer e.Close()
	ctx := context.Background()
	src, dst := make([]byte, 64), make([]byte, 64*batch)
	ds := make([]*Desc, batch)
	for i := range ds {
		ds[i] = &Desc{Src: src, Dst: dst, DstOff: 64 * i, Len: 64}
	}
	for range rounds {
		waitIdle(t, e, 1)
		before := e.Stats().Wakeups
		if _, err := e.Submit(ctx, ds...); err != nil {
			t.Fatal(err)
		}
		e.Ring()
		for _, d := range ds {
			if err := e.Poll(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		if w := e.Stats().Wakeups - before; w > 1 {
			t.Fatalf("%d wake-ups for one doorbell over %d descriptors", w, batch)
		}
	}
}

func TestCoalescing(t *testing.T) {
	ctx := context.Background()
	t.Run("every K", func(t *testing.T) {
		e := New(&Config{Workers: 1, Coalesce: 16, Delay: time.Hour})
		defer e.Close()
		ds := make([]*Desc, 64)
		for i := range ds {
			ds[i] = &Desc{}
		}
		done := make(chan error, 1)
		go func() { done <- e.Wait(ctx, ds[63]) }()
		for e.sleepers.Load() == 0 {
			runtime.Gosched()
		}
		if _, err := e.Post(ctx, ds...); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The last notification follows the status it announces.
		for e.Stats().Notifies < 4 {
			runtime.Gosched()
		}
		if n := e.Stats().Notifies; n != 4 {
			t.Fatalf("%d notifications for 64 completions at K = 16, want 4", n)
		}
	})
	t.Run("after T", func(t *testing.T) {
		e := New(&Config{Workers: 1, Coalesce: 1000, Delay: time.Millisecond})
		defer e.Close()
		d := &Desc{}
		// Only completions seen while somebody waits are announced, so
		// the waiter is in Wait before the descriptor is posted.
		done := make(chan error, 1)
		go func() { done <- e.Wait(ctx, d) }()
		for e.sleepers.Load() == 0 {
			runtime.Gosched()
		}
		if _, err := e.Post(ctx, d); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		// The notification is counted just after the wake-up it makes.
		for e.Stats().Notifies < 1 {
			runtime.Gosched()
		}
		if n := e.Stats().Notifies; n != 1 {
			t.Fatalf("%d notifications, want 1 from the timer", n)
		}
	})
	t.Run("notify flag", func(t *testing.T) {
		e := New(&Config{Workers: 1, Coalesce: 1000, Delay: time.Hour})
		defer e.Close()
		d := &Desc{Flags: Notify}
		if _, err := e.Post(ctx, d); err != nil {
			t.Fatal(err)
		}
		if err := e.Wait(ctx, d); err != nil {
			t.Fatal(err)
		}
	})
}

// fenceCheck is a Mover recording whether the descriptors before it had
// completed when it ran.
type fenceCheck struct {
	before []*Desc
	ok     bool
}

func (f *fenceCheck) Move(*Desc) Status {
	f.ok = true
	for _, d := range f.before {
		if !d.Done() {
			f.ok = false
		}
	}
	return OK
}

func TestFence(t *testing.T) {
	ctx := context.Background()
	e := New(&Config{Workers: 4})
	defer e.Close()
	g := newGate()
	first := &Desc{Mover: g}
	check := &fenceCheck{before: []*Desc{first}}
	second := &Desc{Mover: check, Flags: FenceBefore}
	if _, err := e.Post(ctx, first, second); err != nil {
		t.Fatal(err)
	}
	<-g.started
	close(g.release)
	if err := e.Wait(ctx, second); err != nil {
		t.Fatal(err)
	}
	if !check.ok {
		t.Fatal("a FenceBefore descriptor ran before the one submitted ahead of it completed")
	}

	// Many descriptors, some fenced: each fenced one sees all earlier done.
	const n = 2000
	ds := make([]*Desc, n)
	var checks []*fenceCheck
	src := make([]byte, 4096)
	for i := range ds {
		if i%37 == 36 {
			c := &fenceCheck{before: append([]*Desc(nil), ds[:i]...)}
			checks = append(checks, c)
			ds[i] = &Desc{Mover: c, Flags: FenceBefore}
		} else {
			ds[i] = &Desc{Src: src, Dst: make([]byte, 512+i%3000), Len: 512 + i%3000}
		}
	}
	for i := 0; i < n; i += 100 {
		if _, err := e.Post(ctx, ds[i:i+100]...); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range ds {
		if err := e.Wait(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range checks {
		if !c.ok {
			t.Fatalf("fenced descriptor %d ran before an earlier one completed", i)
		}
	}
}

func TestSignalAfter(t *testing.T) {
	ctx := context.Background()
	e := New(&Config{Workers: 2})
	defer e.Close()
	src, dst := []byte("payload!"), make([]byte, 8)
	var sig uint64
	d := &Desc{Src: src, Dst: dst, Len: 8, Flags: SignalAfter, Signal: &sig, Add: 3}
	if _, err := e.Post(ctx, d); err != nil {
		t.Fatal(err)
	}
	for atomic.LoadUint64(&sig) < 3 {
		runtime.Gosched()
	}
	if string(dst) != "payload!" {
		t.Fatalf("signal seen before the data: %q", dst)
	}
	if err := e.Wait(ctx, d); err != nil {
		t.Fatal(err)
	}
	// No signal after a failed move.
	bad := &Desc{Src: src, Dst: dst, Len: 9, Flags: SignalAfter, Signal: &sig, Add: 1}
	if _, err := e.Post(ctx, bad); err != nil {
		t.Fatal(err)
	}
	var se *StatusError
	if err := e.Wait(ctx, bad); !errors.As(err, &se) || se.Status != OutOfBounds {
		t.Fatalf("out-of-bounds descriptor: %v", err)
	}
	if atomic.LoadUint64(&sig) != 3 {
		t.Fatal("a failed descriptor raised its signal")
	}
}

func TestClose(t *testing.T) {
	ctx := context.Background()
	e := New(&Config{Workers: 1, Depth: 4})
	g := newGate()
	block := &Desc{Mover: g}
	if _, err := e.Post(ctx, block); err != nil {
		t.Fatal(err)
	}
	<-g.started
	queued := &Desc{}
	if _, err := e.Submit(ctx, queued); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { e.Close(); close(closed) }()
	for !e.closed.Load() {
		runtime.Gosched()
	}
	close(g.release)
	<-closed
	if s := queued.Status(); s != Aborted && s != OK {
		t.Fatalf("a queued descriptor ended %v after Close", s)
	}
	if n, err := e.Submit(ctx, &Desc{}); !errors.Is(err, ErrClosed) || n > 1 {
		t.Fatalf("Submit after Close: %d, %v", n, err)
	}
}

// The copy engine's batching benchmark: 64 descriptors of 64 bytes behind
// one doorbell, against 64 submissions that each ring and wait.
func BenchmarkDoorbell(b *testing.B) {
	const batch = 64
	ctx := context.Background()
	src, dst := make([]byte, 64), make([]byte, 64*batch)
	ds := make([]*Desc, batch)
	for i := range ds {
		ds[i] = &Desc{Src: src, Dst: dst, DstOff: 64 * i, Len: 64}
	}
	b.Run("batched", func(b *testing.B) {
		e := New(&Config{Workers: 2})
		defer e.Close()
		b.SetBytes(64 * batch)
		for b.Loop() {
			if _, err := e.Post(ctx, ds...); err != nil {
				b.Fatal(err)
			}
			for _, d := range ds {
				if err := e.Poll(ctx, d); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/desc")
	})
	b.Run("separate", func(b *testing.B) {
		e := New(&Config{Workers: 2})
		defer e.Close()
		b.SetBytes(64 * batch)
		for b.Loop() {
			for _, d := range ds {
				if _, err := e.Post(ctx, d); err != nil {
					b.Fatal(err)
				}
				if err := e.Poll(ctx, d); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/desc")
	})
}

// Completion by polling against coalesced notification (K = 16): the
// latency of a batch of 64 descriptors of 4 KiB and the CPU the process
// spends per batch (cpu-ns/op), workers included.
func BenchmarkCompletion(b *testing.B) {
	const batch = 64
	ctx := context.Background()
	src := make([]byte, 4096)
	ds := make([]*Desc, batch)
	for i := range ds {
		ds[i] = &Desc{Src: src, Dst: make([]byte, 4096), Len: 4096}
	}
	for _, tc := range []struct {
		name string
		k    int
		poll bool
	}{{"poll", 1, true}, {"coalesce16", 16, false}, {"notify-each", 1, false}} {
		b.Run(tc.name, func(b *testing.B) {
			e := New(&Config{Workers: 1, Coalesce: tc.k, Delay: 20 * time.Microsecond})
			defer e.Close()
			wait := e.Wait
			if tc.poll {
				wait = e.Poll
			}
			cpu := cpuTime()
			for b.Loop() {
				if _, err := e.Post(ctx, ds...); err != nil {
					b.Fatal(err)
				}
				for _, d := range ds {
					if err := wait(ctx, d); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// Config.Pin runs first on every worker, before it takes a descriptor.
func TestPinEveryWorker(t *testing.T) {
	var pinned atomic.Int32
	started := make(chan struct{}, 3)
	e := New(&Config{Workers: 3, Pin: func() { pinned.Add(1); started <- struct{}{} }})
	for range 3 {
		<-started
	}
	src, dst := []byte("pinned"), make([]byte, 6)
	d := &Desc{Src: src, Dst: dst, Len: 6}
	if _, err := e.Post(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if err := e.Poll(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	e.Close()
	if pinned.Load() != 3 || string(dst) != "pinned" {
		t.Fatalf("Pin ran %d times for 3 workers; copied %q", pinned.Load(), dst)
	}
}

// A split copy is complete and right, whatever part the workers took, and
// after the engine is closed it still copies (by the caller).
func TestSplitter(t *testing.T) {
	e := New(&Config{Workers: 3})
	var moved atomic.Int64
	s := NewSplitter(e, 1000, 3, func(dst, src []byte) { moved.Add(int64(len(dst))); copy(dst, src) })
	for _, n := range []int{0, 999, 1000, 4096, 1<<20 + 13} {
		src, dst := make([]byte, n), make([]byte, n)
		for i := range src {
			src[i] = byte(i*7 + n)
		}
		moved.Store(0)
		split := s.Copy(dst, src)
		if !bytes.Equal(dst, src) {
			t.Fatalf("%d bytes: copy differs", n)
		}
		if split != (n >= 1000) {
			t.Errorf("%d bytes: split %v", n, split)
		}
		if moved.Load() != int64(n) {
			t.Errorf("%d bytes: the move function copied %d", n, moved.Load())
		}
	}
	e.Close()
	src, dst := bytes.Repeat([]byte{9}, 1<<16), make([]byte, 1<<16)
	s.Copy(dst, src)
	if !bytes.Equal(dst, src) {
		t.Fatal("copy after Close differs")
	}
	var nilS *Splitter
	nilS.Copy(dst[:3], []byte{1, 2, 3})
	if dst[0] != 1 {
		t.Fatal("nil splitter did not copy")
	}
}

// parts counts how often Run did each byte, and on which goroutines.
type parts struct {
	mu    sync.Mutex
	count []int
	calls int
}

func (p *parts) Part(lo, hi int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	for i := lo; i < hi; i++ {
		p.count[i]++
	}
}

// Run cuts a job into parts that cover every byte once, and a Copy after
// it still copies through the splitter's move function.
func TestSplitterRun(t *testing.T) {
	e := New(&Config{Workers: 3})
	var moved atomic.Int64
	s := NewSplitter(e, 1000, 3, func(dst, src []byte) { moved.Add(int64(len(dst))); copy(dst, src) })
	check := func(n int, closed bool) {
		t.Helper()
		p := &parts{count: make([]int, n)}
		split := s.Run(n, p)
		for i, c := range p.count {
			if c != 1 {
				t.Fatalf("%d bytes: byte %d done %d times", n, i, c)
			}
		}
		if want := n >= 1000 && !closed; split != want {
			t.Errorf("%d bytes: split %v, want %v", n, split, want)
		}
		if split && p.calls != 4 {
			t.Errorf("%d bytes: %d parts, want 4", n, p.calls)
		}
	}
	for _, n := range []int{0, 999, 1000, 4096, 1<<20 + 13} {
		check(n, false)
	}
	src, dst := bytes.Repeat([]byte{5}, 4096), make([]byte, 4096)
	if !s.Copy(dst, src) || !bytes.Equal(dst, src) || moved.Load() != 4096 {
		t.Fatalf("Copy after Run: moved %d bytes", moved.Load())
	}
	e.Close()
	// Aborted parts are done by the caller.
	p := &parts{count: make([]int, 1<<16)}
	s.Run(1<<16, p)
	for i, c := range p.count {
		if c != 1 {
			t.Fatalf("after Close: byte %d done %d times", i, c)
		}
	}
}

func TestAuto(t *testing.T) {
	for _, tc := range []struct{ cpus, local, want int }{
		{2, 2, 0}, {2, 1, 1}, {4, 2, 1}, {16, 2, 4}, {1, 0, 0}, {8, 1, 4},
	} {
		if got := Auto(tc.cpus, tc.local); got != tc.want {
			t.Errorf("Auto(%d, %d) = %d, want %d", tc.cpus, tc.local, got, tc.want)
		}
	}
}

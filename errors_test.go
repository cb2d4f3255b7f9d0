package hcomm

import (
	"context"
	"errors"
	"fmt"
	"github.com/hcomm-go/hcomm/internal/allocs"
	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/settings"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestInvalidArguments(t *testing.T) {
	ctx := context.Background()
	comms := newLocal(t, 3, nil)
	c := comms[1]
	buf := make([]float32, 12)
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"allreduce lengths", func() error { return AllReduce(ctx, c, buf[:3], buf[3:5], Sum) }, "len(recv)"},
		{"allreduce op", func() error { return AllReduce(ctx, c, buf[:3], buf[3:6], Op(42)) }, "unknown reduction op"},
		{"allreduce partial overlap", func() error { return AllReduce(ctx, c, buf[:4], buf[2:6], Sum) }, "overlap"},
		{"bytes dtype", func() error { return c.AllReduceBytes(ctx, make([]byte, 8), make([]byte, 8), DType(99), Sum) }, "unknown dtype"},
		{"bytes odd length", func() error {
			return c.AllReduceBytes(ctx, make([]byte, 6), make([]byte, 6), DTypeFloat32, Sum)
		}, "multiple of the element size"},
		{"reduce root", func() error { return Reduce(ctx, c, buf[:3], buf[3:6], Sum, 3) }, "root 3"},
		{"reduce negative root", func() error { return Reduce(ctx, c, buf[:3], nil, Sum, -1) }, "root -1"},
		{"reduce recv at root", func() error { return Reduce(ctx, c, buf[:3], buf[3:5], Sum, 1) }, "len(recv)"},
		{"broadcast root", func() error { return Broadcast(ctx, c, buf, 7) }, "root 7"},
		{"allgather lengths", func() error { return AllGather(ctx, c, buf[:2], buf[2:7]) }, "len(recv)"},
		{"allgatherv counts len", func() error { return AllGatherV(ctx, c, buf[:1], buf[1:4], []int{1, 1}) }, "len(counts)"},
		{"allgatherv negative", func() error { return AllGatherV(ctx, c, buf[:1], buf[1:4], []int{1, 1, -1}) }, "negative"},
		{"allgatherv send", func() error { return AllGatherV(ctx, c, buf[:2], buf[2:5], []int{1, 1, 1}) }, "len(send)"},
		{"reducescatter lengths", func() error { return ReduceScatter(ctx, c, buf[:5], buf[5:7], Sum) }, "len(send)"},
		{"reducescatterv recv", func() error { return ReduceScatterV(ctx, c, buf[:3], buf[3:5], []int{1, 1, 1}, Sum) }, "len(recv)"},
		{"alltoall divisible", func() error { return AllToAll(ctx, c, buf[:4], buf[4:8]) }, "multiple of Size"},
		{"alltoallv self", func() error {
			return AllToAllV(ctx, c, buf[:3], []int{1, 1, 1}, buf[3:7], []int{1, 2, 1})
		}, "block to itself"},
		{"gather recv at root", func() error { return Gather(ctx, c, buf[:2], buf[2:4], 1) }, "len(recv)"},
		{"scatter send at root", func() error { return Scatter(ctx, c, buf[:2], buf[2:4], 1) }, "len(send)"},
		{"send to self", func() error { return Send(ctx, c, buf, 1, 0) }, "peer 1"},
		{"send out of range", func() error { return Send(ctx, c, buf, 3, 0) }, "peer 3"},
		{"recv negative peer", func() error { return Recv(ctx, c, buf, -1, 0) }, "peer -1"},
		{"negative tag", func() error { return Send(ctx, c, buf, 0, -2) }, "tag"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
			var oe *OpError
			if !errors.As(err, &oe) || oe.Rank != 1 {
				t.Fatalf("err = %#v, want an *OpError of rank 1", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %q, want it to mention %q", err, tt.want)
			}
		})
	}
	// Nothing was sent: the communicator still works.
	errs := par(comms, func(c *Comm) error {
		x := []int32{1}
		if err := AllReduce(ctx, c, x, x, Sum); err != nil {
			return err
		}
		if x[0] != 3 {
			t.Errorf("rank %d: sum %d, want 3", c.Rank(), x[0])
		}
		return nil
	})
	noErrs(t, "after invalid arguments", errs)
}

func TestNewLocalInvalid(t *testing.T) {
	if _, err := NewLocal(context.Background(), 0, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("NewLocal(0) = %v, want ErrInvalidArgument", err)
	}
	if _, err := NewLocal(context.Background(), 2, &Config{Algo: "allreduce=nope"}); !errors.Is(err, ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "nope") {
		t.Fatalf("bad Algo: %v", err)
	}
	t.Setenv("HCOMM_TIMEOUT", "soon")
	if _, err := NewLocal(context.Background(), 2, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad HCOMM_TIMEOUT: %v", err)
	}
}

// within runs f on every rank and fails the test if it takes longer than d.
func within(t *testing.T, d time.Duration, comms []*Comm, f func(c *Comm) error) []error {
	t.Helper()
	done := make(chan []error, 1)
	go func() { done <- par(comms, f) }()
	select {
	case errs := <-done:
		return errs
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		t.Fatalf("ranks still blocked after %v:\n%s", d, buf[:runtime.Stack(buf, true)])
		return nil
	}
}

func TestMismatch(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		f    func(c *Comm) error
		want []string
	}{
		{"count", func(c *Comm) error {
			x := make([]float32, 1025+c.Rank()*1000)
			return AllReduce(ctx, c, x, x, Sum)
		}, []string{"AllReduce(float32, 1025, sum)", "AllReduce(float32, 2025, sum)"}},
		{"op", func(c *Comm) error {
			x := make([]float32, 8)
			op := Sum
			if c.Rank() == 1 {
				op = Max
			}
			return AllReduce(ctx, c, x, x, op)
		}, []string{"max", "sum"}},
		{"dtype", func(c *Comm) error {
			if c.Rank() == 0 {
				return AllReduce(ctx, c, make([]int32, 4), make([]int32, 4), Sum)
			}
			return AllReduce(ctx, c, make([]float32, 4), make([]float32, 4), Sum)
		}, []string{"int32", "float32"}},
		{"skipped call", func(c *Comm) error {
			if c.Rank() == 0 {
				if err := c.Barrier(ctx); err != nil {
					return err
				}
			}
			x := make([]int64, 16)
			return AllReduce(ctx, c, x, x, Sum)
		}, []string{"Barrier", "AllReduce"}},
		{"different collective", func(c *Comm) error {
			x := make([]uint8, 6)
			if c.Rank() == 0 {
				return Broadcast(ctx, c, x, 0)
			}
			return AllGather(ctx, c, make([]uint8, 3), x)
		}, []string{"Broadcast", "AllGather"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			comms := newLocal(t, 2, &Config{Timeout: 5 * time.Second})
			errs := within(t, 3*time.Second, comms, tt.f)
			for r, err := range errs {
				if err == nil {
					t.Fatalf("rank %d: no error", r)
				}
				if errors.Is(err, ErrTimeout) {
					t.Fatalf("rank %d: timed out instead of detecting the mismatch: %v", r, err)
				}
			}
			// At least one side sees ErrMismatch with both calls in the
			// message; the other sees it or learns that its peer failed.
			seen := false
			for _, err := range errs {
				if errors.Is(err, ErrMismatch) {
					seen = true
					for _, w := range tt.want {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("mismatch error %q does not mention %q", err, w)
						}
					}
				} else if !errors.Is(err, ErrAborted) && !errors.Is(err, ErrPeerLost) {
					t.Errorf("unexpected error kind: %v", err)
				}
			}
			if !seen {
				t.Fatalf("no rank reported ErrMismatch: %v", errs)
			}
			// The communicator is unusable afterwards.
			if err := comms[0].Barrier(ctx); !errors.Is(err, ErrAborted) {
				t.Fatalf("after a mismatch Barrier = %v, want ErrAborted", err)
			}
		})
	}
}

func TestAbortSpreads(t *testing.T) {
	comms := newLocal(t, 4, nil)
	ctx := context.Background()
	cause := errors.New("out of memory in the data loader")
	errs := within(t, 2*time.Second, comms, func(c *Comm) error {
		if c.Rank() == 2 {
			// Abort once the others are inside the AllReduce.
			for _, r := range []int{0, 1, 3} {
				if err := waitRunning(comms[r], 1); err != nil {
					return err
				}
			}
			c.Abort(cause)
			return nil
		}
		x := make([]float32, 1<<16)
		return AllReduce(ctx, c, x, x, Sum)
	})
	for r, err := range errs {
		if r == 2 {
			continue
		}
		if !errors.Is(err, ErrAborted) && !errors.Is(err, ErrPeerLost) {
			t.Errorf("rank %d: %v, want ErrAborted or ErrPeerLost", r, err)
		}
	}
	// The aborting rank's own later calls fail at once.
	if err := comms[2].Barrier(ctx); !errors.Is(err, ErrAborted) || !errors.Is(err, cause) {
		t.Fatalf("after Abort: %v", err)
	}
	// Some survivor names rank 2 and its cause.
	named := false
	for r, err := range errs {
		var oe *OpError
		if r != 2 && errors.As(err, &oe) && oe.Peer == 2 && strings.Contains(err.Error(), cause.Error()) {
			named = true
		}
	}
	if !named {
		t.Errorf("no survivor named rank 2 and its cause: %v", errs)
	}
}

// A rank that fails because a peer aborted relays the abort; the ranks
// that learn of it from the relay name the rank that aborted, not the
// relaying one, in OpError.Peer.
func TestAbortRelayedNamesOrigin(t *testing.T) {
	comms := newLocal(t, 3, nil)
	ctx := context.Background()
	cause := errors.New("operator gave up")
	errs := within(t, 5*time.Second, comms, func(c *Comm) error {
		switch c.Rank() {
		case 1: // aborts once rank 2 waits for it
			if err := waitP2P(comms[2]); err != nil {
				return err
			}
			c.Abort(cause)
			return nil
		case 2:
			return Recv(ctx, c, make([]byte, 4), 1, 9)
		}
		return Recv(ctx, c, make([]byte, 4), 2, 9) // rank 0 hears only from rank 2
	})
	for _, r := range []int{0, 2} {
		var oe *OpError
		if !errors.As(errs[r], &oe) || oe.Peer != 1 || !errors.Is(errs[r], ErrAborted) || !strings.Contains(oe.Error(), cause.Error()) {
			t.Errorf("rank %d: %v, want ErrAborted naming peer 1 and its cause", r, errs[r])
		}
	}
	if !strings.Contains(errs[0].Error(), "as rank 2 reported") {
		t.Errorf("rank 0: %v, want it to say rank 2 relayed the abort", errs[0])
	}
}

func TestTimeout(t *testing.T) {
	comms := newLocal(t, 2, &Config{Timeout: 200 * time.Millisecond})
	start := time.Now()
	err := AllReduce(context.Background(), comms[0], make([]int32, 4), make([]int32, 4), Sum)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrTimeout and DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "HCOMM_TIMEOUT") {
		t.Errorf("timeout error %q does not name the knob", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v", d)
	}
	// The peer that never came learns of it when it does come.
	err = AllReduce(context.Background(), comms[1], make([]int32, 4), make([]int32, 4), Sum)
	if !errors.Is(err, ErrAborted) && !errors.Is(err, ErrPeerLost) {
		t.Fatalf("late peer: %v", err)
	}
}

func TestContextDeadline(t *testing.T) {
	comms := newLocal(t, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := comms[1].Barrier(ctx)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v, want ErrTimeout", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	err = Recv(ctx2, comms[2], make([]byte, 3), 0, 0)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Recv: %v", err)
	}
}

func TestClose(t *testing.T) {
	comms := newLocal(t, 2, nil)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- AllReduce(ctx, comms[0], make([]float64, 10), make([]float64, 10), Sum) }()
	if err := waitRunning(comms[0], 1); err != nil {
		t.Fatal(err)
	}
	if err := comms[0].Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("pending call: %v, want ErrClosed", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not unblock the pending call")
	}
	if err := comms[0].Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := comms[0].Barrier(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	// The peer sees rank 0 as lost.
	err := comms[1].Barrier(ctx)
	if !errors.Is(err, ErrPeerLost) {
		t.Fatalf("peer of a closed rank: %v", err)
	}
}

func TestSplit(t *testing.T) {
	ctx := context.Background()
	comms := newLocal(t, 7, nil)
	subs := make([]*Comm, 7)
	errs := par(comms, func(c *Comm) error {
		color := c.Rank() % 3
		if c.Rank() == 6 {
			color = -1
		}
		s, err := c.Split(ctx, color, -c.Rank()) // reversed order
		subs[c.Rank()] = s
		return err
	})
	if !noErrs(t, "Split", errs) {
		return
	}
	defer func() {
		for _, s := range subs {
			if s != nil {
				s.Close()
			}
		}
	}()
	if subs[6] != nil {
		t.Fatal("rank with a negative color got a communicator")
	}
	// color 0: ranks 0, 3 → keys 0, -3 → order 3, 0.
	want := map[int][2]int{0: {1, 2}, 3: {0, 2}, 1: {1, 2}, 4: {0, 2}, 2: {1, 2}, 5: {0, 2}}
	for r, w := range want {
		if subs[r].Rank() != w[0] || subs[r].Size() != w[1] {
			t.Errorf("rank %d: sub rank %d size %d, want %v", r, subs[r].Rank(), subs[r].Size(), w)
		}
	}
	errs = par(comms[:6], func(c *Comm) error {
		x := []int64{int64(c.Rank())}
		if err := AllReduce(ctx, subs[c.Rank()], x, x, Sum); err != nil {
			return err
		}
		if want := int64(c.Rank()%3*2 + 3); x[0] != want {
			t.Errorf("rank %d: sum over its color %d, want %d", c.Rank(), x[0], want)
		}
		return nil
	})
	noErrs(t, "AllReduce on split", errs)
}

// TestNaNMinMax pins the documented NaN and signed-zero behaviour.
func TestNaNMinMax(t *testing.T) {
	ctx := context.Background()
	nan := float32(math.NaN())
	negz := float32(math.Copysign(0, -1))
	in := [][]float32{{nan, 1, negz, 2}, {3, nan, 0, nan}}
	for _, op := range []Op{Min, Max} {
		comms := newLocal(t, 2, nil)
		outs := make([][]float32, 2)
		errs := par(comms, func(c *Comm) error {
			outs[c.Rank()] = make([]float32, 4)
			return AllReduce(ctx, c, in[c.Rank()], outs[c.Rank()], op)
		})
		if !noErrs(t, "AllReduce", errs) {
			return
		}
		for r, out := range outs {
			for i := 0; i < 4; i++ {
				if i != 2 && math.Float32bits(out[i]) != 0x7fc00000 {
					t.Errorf("%v rank %d element %d = %v (%#x), want the canonical NaN", op, r, i, out[i], math.Float32bits(out[i]))
				}
			}
			z := math.Float32bits(out[2])
			if op == Min && z != math.Float32bits(negz) || op == Max && z != 0 {
				t.Errorf("%v of -0 and +0 on rank %d = %#x", op, r, z)
			}
		}
	}
}

func TestHalfConversions(t *testing.T) {
	for _, tt := range []struct {
		f    float32
		h    Float16
		back float32
	}{
		{1, 0x3c00, 1}, {-2, 0xc000, -2}, {65504, 0x7bff, 65504}, {65520, 0x7c00, float32(math.Inf(1))},
		{1.0009765625, 0x3c01, 1.0009765625}, {1.00048828125, 0x3c00, 1}, // a tie rounds to even
	} {
		if got := Float16From(tt.f); got != tt.h {
			t.Errorf("Float16From(%v) = %#x, want %#x", tt.f, got, tt.h)
		}
		if got := tt.h.Float32(); got != tt.back {
			t.Errorf("Float16(%#x).Float32() = %v, want %v", tt.h, got, tt.back)
		}
	}
	if got := BFloat16From(1.5); got != 0x3fc0 || got.Float32() != 1.5 {
		t.Errorf("BFloat16From(1.5) = %#x", got)
	}
}

func TestCheckResults(t *testing.T) {
	ctx := context.Background()
	comms := newLocal(t, 3, &Config{CheckResults: true})
	run := func() []error {
		return par(comms, func(c *Comm) error {
			x := []float32{float32(c.Rank()), 2}
			return AllReduce(ctx, c, x, x, Sum)
		})
	}
	noErrs(t, "clean AllReduce", run())
	checkResultsHook = func(rank int, out []byte) {
		if rank == 1 {
			out[0] ^= 1
		}
	}
	defer func() { checkResultsHook = nil }()
	for r, err := range run() {
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "results differ") || !strings.Contains(err.Error(), "rank 1") {
			t.Errorf("rank %d: %v, want ErrMismatch naming rank 1", r, err)
		}
	}
}

func TestDumpSignal(t *testing.T) {
	t.Setenv("HCOMM_DUMP_SIGNAL", "USR1")
	var buf syncBuf
	defer diag.SetDumpOutput(&buf)()
	comms := newLocal(t, 2, nil)
	ctx := context.Background()
	noErrs(t, "AllReduce", par(comms, func(c *Comm) error {
		x := make([]float64, 7)
		return AllReduce(ctx, c, x, x, Max)
	}))
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(buf.String(), "AllReduce(float64, 7, max) done") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := buf.String(); !strings.Contains(s, "#1 AllReduce(float64, 7, max) done") || !strings.Contains(s, "rank 1 of 2") {
		t.Fatalf("dump:\n%s", s)
	}
}

// waitRunning waits until c's flight recorder shows operation seq running:
// the call has passed its checks and is in the executor, blocked or about
// to block on its peers. Tests act on a blocked call through it instead of
// sleeping and hoping.
func waitRunning(c *Comm, seq uint64) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		if s := c.path.Rec.Snapshot(); s.Entered >= seq && s.State == "running" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rank %d never entered op #%d", c.Rank(), seq)
		}
		time.Sleep(time.Millisecond) // polls a condition; acts only once it holds
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestCollectiveDoesNotAllocate: in steady state a collective allocates
// nothing under a context that cannot be cancelled, and a few small
// objects (to watch the parent) under one that can.
func TestCollectiveDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, name := range []string{"background", "cancellable"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if name == "cancellable" {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			comms := newLocal(t, 2, nil)
			x0, x1 := make([]float32, 1024), make([]float32, 1024)
			start, done := make(chan struct{}), make(chan error)
			go func() {
				for range start {
					done <- AllReduce(ctx, comms[1], x1, x1, Sum)
				}
			}()
			defer close(start)
			step := func() {
				start <- struct{}{}
				if err := AllReduce(ctx, comms[0], x0, x0, Sum); err != nil {
					t.Fatal(err)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			step() // warm up: programs, scratch, workers, hooks
			limit := 0.0
			if name == "cancellable" {
				limit = 8 // context.AfterFunc on each rank's parent
			}
			n := allocs.PerRun(50, limit, step)
			if n > limit {
				t.Errorf("%v allocations per AllReduce (both ranks), want at most %v", n, limit)
			}
			t.Logf("%s: %v allocations per AllReduce (both ranks)", name, n)
		})
	}
}

// TestInitBadEnv checks that Init refuses malformed HCOMM_ variables with
// an invalid-argument error naming the variable.
func TestInitBadEnv(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{"HCOMM_TRANSPORT", "carrier-pigeon"},
		{"HCOMM_NSOCKS", "0"},
		{"HCOMM_NSOCKS", "many"},
		{"HCOMM_SHM_CMA", "big"},
		{"HCOMM_YIELD", "sometimes"},
		{"HCOMM_TCP_POLL", "fast"},
		{"HCOMM_TCP_POLL", "-5us"},
		{"HCOMM_CONNECT_TIMEOUT", "later"},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			t.Setenv(tc.name, tc.value)
			c, err := Init(context.Background(), nil)
			if err == nil {
				c.Close()
				t.Fatal("Init accepted it")
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.name) {
				t.Errorf("Init = %v, want ErrInvalidArgument naming %s", err, tc.name)
			}
		})
	}
	for _, kv := range [][2]string{{"HCOMM_YIELD", "auto"}, {"HCOMM_YIELD", "1"}, {"HCOMM_YIELD", "0"},
		{"HCOMM_YIELD", "off"}, {"HCOMM_TCP_POLL", "0"}, {"HCOMM_TCP_POLL", "20us"}} {
		t.Setenv(kv[0], kv[1])
		c, err := Init(context.Background(), nil)
		if err != nil {
			t.Fatalf("%s=%s: %v", kv[0], kv[1], err)
		}
		c.Close()
	}
}

// The documented defaults are the settings table's.
func TestDefaultsMatchSettings(t *testing.T) {
	if DefaultTimeout != settings.DefaultTimeout || DefaultConnectTimeout != settings.DefaultConnectTimeout {
		t.Errorf("DefaultTimeout %v, DefaultConnectTimeout %v; the settings table says %v, %v",
			DefaultTimeout, DefaultConnectTimeout, settings.DefaultTimeout, settings.DefaultConnectTimeout)
	}
}

package hcomm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/allocs"
)

// rankWindow is one rank's part of the window tests: every rank calls it.
func rankWindow(t *testing.T, c *Comm, alloc bool) {
	ctx := context.Background()
	me, n := c.Rank(), c.Size()
	const part = 3000
	size := n * part
	var w *Window
	var err error
	if alloc {
		w, err = c.AllocWindow(ctx, size)
	} else {
		w, err = c.NewWindow(ctx, make([]byte, size))
	}
	if err != nil {
		t.Fatal(err)
	}
	if per, _ := strconv.Atoi(os.Getenv("HCOMM_TEST_PER_HOST")); per > 0 {
		for p := range n {
			mode := w.w.Mode(p)
			switch {
			case p == me:
			case p/per != me/per && mode != "messages":
				t.Errorf("rank %d reaches rank %d (other host) by %s", me, p, mode)
			case p/per == me/per && mode == "messages":
				t.Errorf("rank %d reaches rank %d (same host) by messages", me, p)
			}
		}
	}
	if got := w.Size(me); got != size || len(w.Bytes()) != size {
		t.Fatalf("Size(%d) = %d, Bytes %d, want %d", me, got, len(w.Bytes()), size)
	}
	fill := func(seed int) []byte {
		b := make([]byte, part)
		for i := range b {
			b[i] = byte(seed*31 + i)
		}
		return b
	}
	// Every rank writes its part of every rank's window.
	for tg := range n {
		if err := w.Put(ctx, tg, me*part, fill(me)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	for src := range n {
		if !bytes.Equal(w.Bytes()[src*part:(src+1)*part], fill(src)) {
			t.Fatalf("rank %d: the part rank %d put is wrong", me, src)
		}
	}
	// Get the next rank's window back.
	next, prev := (me+1)%n, (me+n-1)%n
	got := make([]byte, size)
	if err := w.Get(ctx, next, 0, got); err != nil {
		t.Fatal(err)
	}
	for src := range n {
		if !bytes.Equal(got[src*part:(src+1)*part], fill(src)) {
			t.Fatalf("rank %d: Get from %d: part %d wrong", me, next, src)
		}
	}
	if err := w.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	// A ring of PutSignal / WaitSignal: the data is there when the signal is.
	for round := uint64(1); round <= 20; round++ {
		msg := []byte(fmt.Sprintf("round %02d from %d", round, me))
		if err := w.PutSignal(ctx, next, 0, msg, 1, 1); err != nil {
			t.Fatal(err)
		}
		v, err := w.WaitSignal(ctx, 1, round)
		if err != nil {
			t.Fatal(err)
		}
		if v != round {
			t.Fatalf("signal %d in round %d", v, round)
		}
		if want := fmt.Sprintf("round %02d from %d", round, prev); string(w.Bytes()[:len(want)]) != want {
			t.Fatalf("rank %d round %d: %q, want %q", me, round, w.Bytes()[:len(want)], want)
		}
		// Do not overwrite the next rank's bytes before it read them.
		if err := w.PutSignal(ctx, prev, 0, nil, 2, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := w.WaitSignal(ctx, 2, round); err != nil {
			t.Fatal(err)
		}
	}
	// A 4x5 block from a local 4x10 matrix to (row 2, column 3) of the
	// next rank's window seen as rows of 100 bytes, and back.
	if err := w.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	mat := bytes.Repeat([]byte("0123456789"), 4)
	if err := w.PutStrided(ctx, next, 203, mat, 4, 5, 10, 100); err != nil {
		t.Fatal(err)
	}
	if err := w.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		if row := string(w.Bytes()[203+100*r : 208+100*r]); row != "01234" {
			t.Fatalf("strided row %d: %q", r, row)
		}
	}
	block := make([]byte, 20)
	if err := w.GetStrided(ctx, next, 203, block, 4, 5, 100, 5); err != nil {
		t.Fatal(err)
	}
	if string(block) != strings.Repeat("01234", 4) {
		t.Fatalf("GetStrided: %q", block)
	}
	// Out of range: refused locally, nothing written anywhere.
	err = w.Put(ctx, next, size-2, []byte("xyz"))
	var oe *OpError
	if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &oe) || oe.Op != "Put" || oe.Peer != next ||
		!strings.Contains(err.Error(), fmt.Sprintf("offset %d length 3", size-2)) {
		t.Fatalf("Put past the end: %v", err)
	}
	if err := w.GetStrided(ctx, next, 0, block, 4, 5, 100000, 5); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("GetStrided past the end: %v", err)
	}
	if err := w.PutSignal(ctx, next, 0, nil, WindowSignals, 1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("PutSignal to signal %d: %v", WindowSignals, err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Put(ctx, next, 0, []byte{1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if err := w.Close(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

func TestWindowLocal(t *testing.T) {
	for _, messages := range []bool{false, true} {
		for _, alloc := range []bool{true, false} {
			t.Run(fmt.Sprintf("alloc=%v/messages=%v", alloc, messages), func(t *testing.T) {
				windowMessages = messages
				defer func() { windowMessages = false }()
				comms, err := NewLocal(context.Background(), 3, nil)
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				for _, c := range comms {
					wg.Go(func() { rankWindow(t, c, alloc) })
				}
				wg.Wait()
				for _, c := range comms {
					c.Close()
				}
			})
		}
	}
}

func TestWindowAllocNegative(t *testing.T) {
	comms, err := NewLocal(context.Background(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer comms[0].Close()
	if _, err := comms[0].AllocWindow(context.Background(), -1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("AllocWindow(-1): %v", err)
	}
}

// rankWindowProcess runs the window tests in a rank process.
func rankWindowProcess(t *testing.T, c *Comm) {
	windowMessages = os.Getenv("HCOMM_TEST_WINDOW_MESSAGES") == "1"
	rankWindow(t, c, true)
	rankWindow(t, c, false)
}

// TestWindowMultiProcess runs the window tests with separate processes:
// mapped and cross-memory access over shm, and the message path over shm
// and TCP.
func TestWindowMultiProcess(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, tc := range []struct {
		tr       string
		messages string
	}{{"shm", "0"}, {"shm", "1"}, {"tcp", "1"}} {
		t.Run(tc.tr+"/messages="+tc.messages, func(t *testing.T) {
			out, err := spawnJob(t, 3, "window", "HCOMM_TRANSPORT="+tc.tr, "HCOMM_TEST_WINDOW_MESSAGES="+tc.messages)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// rankWindowKill: the last rank kills itself after making a window; the
// others Put to it until that fails, and report how.
func rankWindowKill(t *testing.T, c *Comm) {
	signal.Ignore(syscall.SIGTERM) // report before the launcher's SIGKILL
	windowMessages = os.Getenv("HCOMM_TEST_WINDOW_MESSAGES") == "1"
	ctx := context.Background()
	w, err := c.AllocWindow(ctx, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Fence(ctx); err != nil {
		t.Fatal(err)
	}
	victim := c.Size() - 1
	if c.Rank() == victim {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	start := time.Now()
	for i := 0; err == nil && time.Since(start) < time.Minute; i++ {
		err = w.Put(ctx, victim, 8*(i%512), []byte("01234567"))
		if i%64 == 63 {
			time.Sleep(time.Millisecond)
		}
	}
	survivorLine(c, err, time.Since(start))
}

func TestWindowPeerLost(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, tc := range []struct{ tr, messages string }{{"shm", "0"}, {"tcp", "1"}} {
		t.Run(tc.tr+"/messages="+tc.messages, func(t *testing.T) {
			out, surv, err := faultJob(t, 3, "windowkill", "HCOMM_TRANSPORT="+tc.tr, "HCOMM_TEST_WINDOW_MESSAGES="+tc.messages)
			if err == nil {
				t.Fatalf("the launcher exited 0 after a rank was killed:\n%s", out)
			}
			for r := 0; r < 2; r++ {
				s, ok := surv[r]
				if !ok {
					t.Fatalf("rank %d did not report:\n%s", r, lastLines(out, 30))
				}
				if s["kind"] != "peerlost" || !strings.Contains(s["err"], "peer 2") {
					t.Errorf("rank %d's Put to the killed rank ended with %s: %s", r, s["kind"], s["err"])
				}
			}
		})
	}
}

// TestWindowMultiHost runs the window tests on two network namespaces:
// ranks of one namespace map each other's windows, the others use the
// message path over TCP.
func TestWindowMultiHost(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	cl := newCluster(t, 2, "")
	const n, per = 4, 2
	rsh := nsRsh(t, t.TempDir())
	out, err := launch(t, []string{"-n", strconv.Itoa(n),
		"--hosts", fmt.Sprintf("%s:%d,%s:%d", cl.hosts[0], per, cl.hosts[1], per),
		"--rsh", rsh, "--store-addr", cl.addr(0) + ":0", "--tag-output", "--timeout", "4m",
		"-x", childEnv, "-x", "HCOMM_TEST_PER_HOST"},
		[]string{"ip", "netns", "exec", cl.hosts[0]}, "window", fmt.Sprintf("HCOMM_TEST_PER_HOST=%d", per))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// A window left open is released by the communicator's Close (goleak in
// TestMain checks its goroutines are gone).
func TestWindowReleasedByCommClose(t *testing.T) {
	ctx := context.Background()
	for _, messages := range []bool{false, true} {
		windowMessages = messages
		comms, err := NewLocal(ctx, 2, nil)
		if err != nil {
			t.Fatal(err)
		}
		ws := make([]*Window, 2)
		var wg sync.WaitGroup
		for i, c := range comms {
			wg.Go(func() {
				w, err := c.AllocWindow(ctx, 64)
				if err != nil {
					t.Error(err)
				}
				ws[i] = w
			})
		}
		wg.Wait()
		windowMessages = false
		for _, c := range comms {
			c.Close()
		}
		if ws[0] == nil {
			t.FailNow()
		}
		if err := ws[0].Put(ctx, 1, 0, []byte{1}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Put after the communicator closed: %v", err)
		}
	}
}

// Put, Get and PutSignal between ranks of one host, and a WaitSignal that
// need not sleep, allocate nothing.
func TestWindowZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	ctx := context.Background()
	comms, err := NewLocal(ctx, 2, &Config{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	ws := make([]*Window, 2)
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Go(func() {
			w, err := c.AllocWindow(ctx, 4096)
			if err != nil {
				t.Error(err)
			}
			ws[i] = w
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	w := ws[0]
	buf := make([]byte, 1024)
	for _, tc := range []struct {
		name string
		f    func()
	}{
		{"Put", func() { w.Put(ctx, 1, 512, buf) }},
		{"Put to self", func() { w.Put(ctx, 0, 512, buf) }},
		{"Get", func() { w.Get(ctx, 1, 512, buf) }},
		{"PutStrided", func() { w.PutStrided(ctx, 1, 0, buf, 4, 16, 32, 64) }},
		{"PutSignal", func() { w.PutSignal(ctx, 0, 0, buf[:8], 3, 1) }},
		{"WaitSignal", func() { w.WaitSignal(ctx, 3, 1) }},
	} {
		if n := allocs.PerRun(100, 0, tc.f); n != 0 {
			t.Errorf("%s allocates %.1f times per call", tc.name, n)
		}
	}
}

// A WaitSignal asleep returns when its communicator is aborted.
func TestWindowWaitSignalAbort(t *testing.T) {
	ctx := context.Background()
	comms, err := NewLocal(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	ws := make([]*Window, 2)
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Go(func() {
			w, err := c.AllocWindow(ctx, 8)
			if err != nil {
				t.Error(err)
			}
			ws[i] = w
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	done := make(chan error, 1)
	go func() {
		_, err := ws[0].WaitSignal(ctx, 0, 1)
		done <- err
	}()
	comms[0].Abort(errors.New("test abort"))
	if err := <-done; !errors.Is(err, ErrAborted) {
		t.Fatalf("WaitSignal after Abort: %v", err)
	}
}

// TestWindowCtx: on either path (mapped memory, messages), a window call
// ended by its ctx's deadline matches ErrTimeout and
// context.DeadlineExceeded, as ErrTimeout documents; and a Put whose ctx
// was done before it began sends nothing, so the window stays usable.
func TestWindowCtx(t *testing.T) {
	for _, messages := range []bool{false, true} {
		t.Run(fmt.Sprintf("messages=%v", messages), func(t *testing.T) {
			windowMessages = messages
			defer func() { windowMessages = false }()
			comms := newLocal(t, 2, &Config{Timeout: 30 * time.Second})
			ctx := context.Background()
			ws := make([]*Window, 2)
			errs := par(comms, func(c *Comm) error {
				w, err := c.AllocWindow(ctx, 64)
				ws[c.Rank()] = w
				return err
			})
			if !noErrs(t, "AllocWindow", errs) {
				return
			}
			dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			_, err := ws[0].WaitSignal(dctx, 0, 1)
			cancel()
			if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("WaitSignal past its ctx's deadline: %v (Is ErrTimeout %v, Is DeadlineExceeded %v)",
					err, errors.Is(err, ErrTimeout), errors.Is(err, context.DeadlineExceeded))
			}
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			for i := range 20 {
				err := ws[0].Put(cctx, 1, 0, []byte{1, 2, 3})
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Fatalf("Put with a cancelled ctx: %v", err)
				}
				if err := ws[0].Put(ctx, 1, 0, []byte{byte(i), 2, 3}); err != nil {
					t.Fatalf("Put after a Put whose ctx was cancelled before it began: %v", err)
				}
			}
			got := make([]byte, 3)
			if err := ws[0].Get(ctx, 1, 0, got); err != nil || got[0] != 19 {
				t.Fatalf("Get: %v, %v", got, err)
			}
			errs = par(comms, func(c *Comm) error { return ws[c.Rank()].Close(ctx) })
			noErrs(t, "Close", errs)
		})
	}
}

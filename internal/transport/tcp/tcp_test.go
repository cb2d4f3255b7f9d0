package tcp

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// planPeer is a peer with the given path rates and nsocks connections per
// path, as addConn lays it out.
func planPeer(nsocks int, rates ...float64) *peer {
	pr := &peer{}
	for i, r := range rates {
		p := &path{idx: i}
		p.setRate(r)
		for range nsocks {
			c := &conn{path: p, pos: len(pr.conns)}
			p.conns = append(p.conns, c)
			pr.conns = append(pr.conns, c)
		}
		pr.paths = append(pr.paths, p)
		pr.mask |= 1 << i
	}
	pr.cut = make([]uint64, len(pr.conns))
	return pr
}

func TestPlan(t *testing.T) {
	now := time.Unix(1000, 0)
	tests := []struct {
		name   string
		nsocks int
		rates  []float64
		total  uint64
		mask   uint16
		shares []float64 // per path, of total, ±1%
	}{
		{"one connection", 1, []float64{1}, 1 << 20, 0, []float64{1}},
		{"sockets on one path", 4, []float64{1}, 1 << 20, 1, []float64{1}},
		{"two equal paths", 1, []float64{1, 1}, 1 << 20, 3, []float64{0.5, 0.5}},
		{"estimates within the band", 1, []float64{1, 1.15}, 1 << 20, 3, []float64{0.5, 0.5}},
		{"three within the band", 2, []float64{1.1, 1, 0.95}, 3 << 20, 7, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{"beyond the band", 1, []float64{1, 1.3}, 1 << 20, 3, []float64{1 / 2.3, 1.3 / 2.3}},
		{"a quarter", 2, []float64{1, 0.25}, 8<<20 + 3, 3, []float64{0.8, 0.2}},
		{"slow home path", 1, []float64{0.1, 1}, 1 << 20, 3, []float64{1.0 / 11, 10.0 / 11}},
		{"home path left out", 1, []float64{0.001, 1}, 1 << 20, 2, []float64{0, 1}},
		{"other path left out", 1, []float64{1, 0.001}, 1 << 20, 0, []float64{1, 0}},
		{"three paths", 2, []float64{3, 1, 0.001}, 1<<30 + 5, 3, []float64{0.75, 0.25, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := planPeer(tt.nsocks, tt.rates...)
			for _, p := range pr.paths {
				p.lastUsed = now // not due for a probe
			}
			mask := pr.plan(tt.total, now)
			if mask != tt.mask {
				t.Errorf("mask %#x, want %#x", mask, tt.mask)
			}
			var sum uint64
			for i, p := range pr.paths {
				var n uint64
				for _, c := range p.conns {
					n += pr.cut[c.pos]
				}
				sum += n
				got := float64(n) / float64(tt.total)
				if d := got - tt.shares[i]; d > 0.01 || d < -0.01 {
					t.Errorf("path %d carries %.3f of the message, want %.3f", i, got, tt.shares[i])
				}
				if tt.shares[i] == 0 && n != 0 {
					t.Errorf("path %d left out carries %d bytes", i, n)
				}
			}
			if sum != tt.total {
				t.Errorf("the cut covers %d bytes of %d", sum, tt.total)
			}
			// A path left out is tried again once reprobeEvery has passed.
			if tt.shares[len(tt.shares)-1] == 0 {
				pr.plan(tt.total, now.Add(reprobeEvery))
				last := pr.paths[len(pr.paths)-1]
				if pr.cut[last.conns[0].pos] == 0 {
					t.Errorf("a path left out is not probed after %v", reprobeEvery)
				}
			}
		})
	}
}

func TestPathSample(t *testing.T) {
	p := &path{}
	p.setRate(100e6)
	p.sample(minSample-1, time.Millisecond)
	if p.getRate() != 100e6 {
		t.Errorf("a sample below minSample moved the rate to %v", p.getRate())
	}
	p.sample(1<<30, time.Microsecond) // absorbed by the socket buffer
	if r := p.getRate(); r > 100e6*(1+rateAlpha*(rateGrowth-1))+1 {
		t.Errorf("one fast sample raised the rate to %v", r)
	}
	for range 20 {
		p.sample(1<<20, time.Second) // 1 MiB/s
	}
	if r := p.getRate(); r > 1.1*(1<<20) {
		t.Errorf("after 20 samples at 1 MiB/s the rate is %v", r)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	good := Config{Rank: 0, Size: 2, Listener: ln, Addrs: []string{"a", "b"}}
	tests := []struct {
		name string
		mod  func(*Config)
	}{
		{"rank out of range", func(c *Config) { c.Rank = 2 }},
		{"negative rank", func(c *Config) { c.Rank = -1 }},
		{"empty world", func(c *Config) { c.Size, c.Addrs = 0, nil }},
		{"no listener", func(c *Config) { c.Listener = nil }},
		{"addresses", func(c *Config) { c.Addrs = c.Addrs[:1] }},
		{"too many sockets", func(c *Config) { c.NSocks = MaxSockets + 1 }},
		{"negative sockets", func(c *Config) { c.NSocks = -1 }},
		{"negative timeout", func(c *Config) { c.ConnectTimeout = -time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.mod(&cfg)
			if _, err := New(cfg); !errors.Is(err, errs.ErrInvalidArgument) {
				t.Errorf("New: %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestBadPeerArguments(t *testing.T) {
	w := newWorld(t, 3, 1)
	w.addrs[2] = ""
	tr := w.transport(1)
	ctx := context.Background()
	fp := fpFor(0, 0)
	for _, peer := range []int{-1, 1, 3, 2} {
		if err := tr.Send(ctx, peer, &fp, nil); !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("Send to %d: %v, want ErrInvalidArgument", peer, err)
		}
		if err := tr.Recv(ctx, peer, &fp, nil); !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("Recv from %d: %v, want ErrInvalidArgument", peer, err)
		}
	}
}

// TestInProcessExchange runs the exchange of the process tests between
// goroutines, where the race detector sees both ends.
func TestInProcessExchange(t *testing.T) {
	for _, nsocks := range []int{1, 4} {
		t.Run(fmt.Sprintf("nsocks=%d", nsocks), func(t *testing.T) {
			const n = 3
			w := newWorld(t, n, nsocks)
			trs := make([]*Transport, n)
			for r := range trs {
				trs[r] = w.transport(r)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			runAll(t, trs, func(tr *Transport) error { return exchange(ctx, tr) })
		})
	}
}

func runAll(t *testing.T, trs []*Transport, f func(*Transport) error) {
	t.Helper()
	var wg sync.WaitGroup
	errc := make(chan error, len(trs))
	for _, tr := range trs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(tr); err != nil {
				errc <- fmt.Errorf("rank %d: %w", tr.Rank(), err)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// TestLazyConnect checks that either rank of a pair may need it first.
func TestLazyConnect(t *testing.T) {
	for _, first := range []int{0, 1} {
		t.Run(fmt.Sprintf("rank %d first", first), func(t *testing.T) {
			w := newWorld(t, 2, 2)
			trs := []*Transport{w.transport(0), w.transport(1)}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			other := 1 - first
			waiting := make(chan int, 1)
			trs[first].onWaitConn = func(peer int) {
				select {
				case waiting <- peer:
				default:
				}
			}
			got := make(chan error, 1)
			go func() {
				// The first rank waits to receive; the other rank
				// sends only later.
				p := make([]byte, 3)
				fp := fpFor(1, 3)
				err := trs[first].Recv(ctx, other, &fp, p)
				if err == nil && string(p) != "abc" {
					err = fmt.Errorf("got %q", p)
				}
				got <- err
			}()
			if p := <-waiting; p != other { // the Recv waits for the connection
				t.Fatalf("Recv waits for rank %d, want %d", p, other)
			}
			fp := fpFor(1, 3)
			if err := trs[other].Send(ctx, first, &fp, []byte("abc")); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestGonePeer checks that a peer whose listener refuses connections is
// reported lost at once, on the dialing side and on the side waiting to be
// dialed: its listener was bound before its address was published, so it
// is gone.
func TestGonePeer(t *testing.T) {
	for _, side := range []string{"dialing", "accepting"} {
		t.Run(side, func(t *testing.T) {
			w := newWorld(t, 2, 1)
			me, gone := 0, 1
			if side == "accepting" {
				me, gone = 1, 0
			}
			w.lns[gone].Close()
			w.lns[gone] = nil
			tr := w.transport(me)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
			defer cancel()
			start := time.Now()
			err := tr.Connect(ctx, []int{gone})
			var perr *errs.PeerError
			if !errors.As(err, &perr) || perr.Peer != gone || !errors.Is(err, errs.ErrPeerLost) || errors.Is(err, errs.ErrTimeout) ||
				!strings.Contains(err.Error(), "the process is gone") {
				t.Fatalf("Connect to a rank that is gone: %v, want ErrPeerLost for rank %d saying it is gone", err, gone)
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("took %v, should not wait for the timeout", d)
			}
		})
	}
}

func TestConnectTimeout(t *testing.T) {
	t.Run("accepting side", func(t *testing.T) {
		w := newWorld(t, 2, 1)
		tr, err := New(Config{Rank: 1, Size: 2, Token: testToken, Listener: w.lns[1], Addrs: w.addrs, ConnectTimeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		w.lns[1] = nil
		defer tr.Close()
		start := time.Now()
		err = tr.Connect(context.Background(), []int{0})
		if !errors.Is(err, errs.ErrTimeout) {
			t.Fatalf("Connect to a rank that never dials: %v, want ErrTimeout", err)
		}
		if d := time.Since(start); d < 200*time.Millisecond || d > 2*time.Second {
			t.Errorf("Connect gave up after %v, want about 200ms", d)
		}
	})
	t.Run("dialing side", func(t *testing.T) {
		w := newWorld(t, 2, 1)
		// Rank 1's listener is bound (connections wait in its backlog)
		// but nothing answers there.
		tr, err := New(Config{Rank: 0, Size: 2, Token: testToken, Listener: w.lns[0], Addrs: w.addrs, ConnectTimeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		w.lns[0] = nil
		defer tr.Close()
		start := time.Now()
		fp := fpFor(0, 0)
		err = tr.Send(context.Background(), 1, &fp, nil)
		if !errors.Is(err, errs.ErrTimeout) || !errors.Is(err, errs.ErrPeerLost) {
			t.Fatalf("Send to a rank that never answers: %v, want ErrTimeout and ErrPeerLost", err)
		}
		if d := time.Since(start); d < 300*time.Millisecond || d > 2*time.Second {
			t.Errorf("dialing gave up after %v, want about 300ms", d)
		}
	})
}

func TestContext(t *testing.T) {
	setup := func(t *testing.T) (*Transport, *Transport) {
		w := newWorld(t, 2, 2)
		tr0, tr1 := w.transport(0), w.transport(1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		runAll(t, []*Transport{tr0, tr1}, func(tr *Transport) error { return tr.Connect(ctx, []int{1 - tr.Rank()}) })
		return tr0, tr1
	}
	// roundTrip checks the pair still works.
	roundTrip := func(t *testing.T, tr0, tr1 *Transport) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		fp := fpFor(7, 5)
		errc := make(chan error, 1)
		go func() { errc <- tr0.Send(ctx, 1, &fp, []byte("hello")) }()
		p := make([]byte, 5)
		if err := tr1.Recv(ctx, 0, &fp, p); err != nil || string(p) != "hello" {
			t.Fatalf("Recv after the interrupted call: %q, %v", p, err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}

	t.Run("recv deadline", func(t *testing.T) {
		tr0, tr1 := setup(t)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		fp := fpFor(1, 8)
		err := tr1.Recv(ctx, 0, &fp, make([]byte, 8))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Recv past its deadline: %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Recv returned %v after its 100ms deadline", d)
		}
		// Nothing was read: the pair is still usable.
		roundTrip(t, tr0, tr1)
	})
	t.Run("recv cancel", func(t *testing.T) {
		tr0, tr1 := setup(t)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		fp := fpFor(1, 8)
		start := time.Now()
		err := tr1.Recv(ctx, 0, &fp, make([]byte, 8))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Recv: %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("Recv returned %v after being cancelled at 100ms", d)
		}
		roundTrip(t, tr0, tr1)
		// The same context, long cancelled, comes back.
		if err := tr1.Recv(ctx, 0, &fp, make([]byte, 8)); !errors.Is(err, context.Canceled) {
			t.Fatalf("Recv under a cancelled context: %v, want context.Canceled", err)
		}
		roundTrip(t, tr0, tr1)
	})
	t.Run("recv cancel, context of a non-comparable type", func(t *testing.T) {
		tr0, tr1 := setup(t)
		parent, cancel := context.WithCancel(context.Background())
		ctx := uncomparableCtx{Context: parent}
		fp := fpFor(1, 8)
		// A call that completes, then one that is cancelled.
		errc := make(chan error, 1)
		go func() { errc <- tr0.Send(ctx, 1, &fp, make([]byte, 8)) }()
		if err := tr1.Recv(ctx, 0, &fp, make([]byte, 8)); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(100*time.Millisecond, cancel)
		if err := tr1.Recv(ctx, 0, &fp, make([]byte, 8)); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Recv: %v, want context.Canceled", err)
		}
		roundTrip(t, tr0, tr1)
	})
	t.Run("send deadline mid-message", func(t *testing.T) {
		tr0, tr1 := setup(t)
		big := make([]byte, 64<<20)
		fp := fpFor(1, len(big))
		// Far more than the socket buffers hold: the send starts at
		// once and blocks part way.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		err := tr0.Send(ctx, 1, &fp, big)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Send past its deadline: %v, want context.DeadlineExceeded", err)
		}
		// The message was cut short: the pair is gone on both sides.
		if err := tr0.Send(context.Background(), 1, &fp, nil); !errors.Is(err, errs.ErrPeerLost) {
			t.Errorf("Send after an interrupted send: %v, want ErrPeerLost", err)
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		if err := tr1.Recv(rctx, 0, &fp, big); !errors.Is(err, errs.ErrPeerLost) {
			t.Errorf("Recv of the cut message: %v, want ErrPeerLost", err)
		}
	})
}

func TestAbort(t *testing.T) {
	w := newWorld(t, 3, 2)
	trs := []*Transport{w.transport(0), w.transport(1), w.transport(2)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runAll(t, trs, func(tr *Transport) error { return barrier(ctx, tr) })

	// Rank 1 waits on rank 0 and on rank 2 when rank 0 aborts.
	type res struct {
		peer int
		err  error
	}
	results := make(chan res, 2)
	for _, peer := range []int{0, 2} {
		go func() {
			fp := fpFor(1, 8)
			results <- res{peer, trs[1].Recv(ctx, peer, &fp, make([]byte, 8))}
		}()
	}
	// Rank 2 is blocked receiving from rank 0 too.
	fromZero := make(chan error, 1)
	go func() {
		fp := fpFor(1, 1<<20)
		fromZero <- trs[2].Recv(ctx, 0, &fp, make([]byte, 1<<20))
	}()
	// And rank 0 itself is blocked receiving from rank 2.
	local := make(chan error, 1)
	go func() {
		fp := fpFor(1, 8)
		local <- trs[0].Recv(ctx, 2, &fp, make([]byte, 8))
	}()
	awaitCall(t, trs[1], 0, false)
	awaitCall(t, trs[1], 2, false)
	awaitCall(t, trs[2], 0, false)
	awaitCall(t, trs[0], 2, false)
	start := time.Now()
	trs[0].Abort(errors.New("out of patience"))

	if err := <-local; !errors.Is(err, errs.ErrAborted) {
		t.Errorf("aborted rank's own Recv: %v, want ErrAborted", err)
	}
	checkPeerAborted := func(who string, err error) {
		t.Helper()
		var perr *errs.PeerError
		if !errors.As(err, &perr) || perr.Peer != 0 || perr.Kind != errs.ErrAborted || perr.Cause == nil || perr.Cause.Error() != "out of patience" {
			t.Errorf("%s: %v, want PeerError{Peer: 0, Kind: ErrAborted, Cause: out of patience}", who, err)
		}
	}
	checkPeerAborted("rank 2's Recv from rank 0", <-fromZero)
	r := <-results
	if r.peer != 0 {
		t.Fatalf("rank 1's Recv from rank %d returned first: %v", r.peer, r.err)
	}
	checkPeerAborted("rank 1's Recv from rank 0", r.err)
	if d := time.Since(start); d > time.Second {
		t.Errorf("peers learned of the abort after %v", d)
	}
	// Rank 1 and 2 are unaffected between themselves.
	fp := fpFor(1, 8)
	if err := trs[2].Send(ctx, 1, &fp, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	if r := <-results; r.err != nil {
		t.Fatalf("Recv from rank %d: %v", r.peer, r.err)
	}
	// Later calls on the aborted rank fail at once.
	if err := trs[0].Send(ctx, 1, &fp, nil); !errors.Is(err, errs.ErrAborted) {
		t.Errorf("Send after Abort: %v, want ErrAborted", err)
	}
	trs[0].Abort(errors.New("again")) // no effect, no hang
	if err := trs[0].Close(); err != nil {
		t.Errorf("Close after Abort: %v", err)
	}
	if err := trs[0].Send(ctx, 1, &fp, nil); !errors.Is(err, errs.ErrClosed) {
		t.Errorf("Send after Close: %v, want ErrClosed", err)
	}
}

// A rank that joins a pair after its peer aborted learns of the abort in the
// handshake.
func TestAbortBeforeConnect(t *testing.T) {
	w := newWorld(t, 2, 1)
	tr0, tr1 := w.transport(0), w.transport(1)
	tr1.Abort(errors.New("gave up early"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	fp := fpFor(0, 0)
	err := tr0.Send(ctx, 1, &fp, nil)
	var perr *errs.PeerError
	if !errors.As(err, &perr) || perr.Kind != errs.ErrAborted || perr.Cause == nil || perr.Cause.Error() != "gave up early" {
		t.Fatalf("Send to an aborted rank: %v, want PeerError{Kind: ErrAborted, Cause: gave up early}", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
}

func TestClose(t *testing.T) {
	before := runtime.NumGoroutine()
	w := newWorld(t, 2, 3)
	tr0, tr1 := w.transport(0), w.transport(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	runAll(t, []*Transport{tr0, tr1}, func(tr *Transport) error { return exchange(ctx, tr) })
	// Small socket buffers, so that the 32 MiB Send below cannot fit in
	// the kernel's (loopback autotuning allows tens of MiB per socket).
	for _, c := range tr0.peers[1].conns {
		c.nc.(*net.TCPConn).SetWriteBuffer(64 << 10)
	}
	for _, c := range tr1.peers[0].conns {
		c.nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	}

	blocked := make(chan error, 2)
	go func() {
		fp := fpFor(1, 8)
		blocked <- tr0.Recv(ctx, 1, &fp, make([]byte, 8))
	}()
	go func() {
		big := make([]byte, 32<<20)
		fp := fpFor(1, len(big))
		blocked <- tr0.Send(ctx, 1, &fp, big)
	}()
	awaitCall(t, tr0, 1, false)
	awaitCall(t, tr0, 1, true)
	start := time.Now()
	if err := tr0.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-blocked; !errors.Is(err, errs.ErrClosed) {
			t.Errorf("call blocked during Close: %v, want ErrClosed", err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close and the calls it ended took %v", d)
	}
	if err := tr0.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// The peer sees the pair go, part way through the message.
	fp := fpFor(1, 32<<20)
	if err := tr1.Recv(ctx, 0, &fp, make([]byte, 32<<20)); !errors.Is(err, errs.ErrPeerLost) {
		t.Errorf("Recv from a closed rank: %v, want ErrPeerLost", err)
	}
	tr1.Close()
	waitGoroutines(t, before)
}

// uncomparableCtx is a context whose dynamic type cannot be compared with ==.
type uncomparableCtx struct {
	context.Context
	_ []int
}

// waitGoroutines fails the test if the number of goroutines does not come
// back to n.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left, want %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWrongToken(t *testing.T) {
	logEveryRefusal(t)
	w := newWorld(t, 3, 1)
	server := w.transport(2)
	good := w.transport(1)
	bad, err := New(Config{Rank: 0, Size: 3, Token: [32]byte{'n', 'o', 'p', 'e'}, CommID: testCommID,
		Listener: w.lns[0], Addrs: w.addrs, ConnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.lns[0] = nil
	defer bad.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	start := time.Now()
	err = bad.Connect(ctx, []int{2})
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Peer != 2 || !strings.Contains(refused.Reason, "authentication failed") {
		t.Fatalf("Connect with the wrong token: %v, want a RefusedError for a token mismatch", err)
	}
	if !errors.Is(err, errs.ErrPeerLost) {
		t.Errorf("refusal %v does not wrap ErrPeerLost", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refusal took %v; it should not wait for the connect timeout", d)
	}
	if log := w.logs.String(); !strings.Contains(log, "refused connection") || !strings.Contains(log, "authentication failed") {
		t.Errorf("server log lacks the refusal:\n%s", log)
	}
	// The listener keeps serving the right peers.
	runAll(t, []*Transport{server, good}, func(tr *Transport) error {
		return barrier2(ctx, tr, 3-tr.Rank())
	})
}

// barrier2 exchanges an empty message with one peer.
func barrier2(ctx context.Context, tr *Transport, peer int) error {
	fp := fpFor(-1, 0)
	errc := make(chan error, 1)
	go func() { errc <- tr.Send(ctx, peer, &fp, nil) }()
	if err := tr.Recv(ctx, peer, &fp, nil); err != nil {
		return err
	}
	return <-errc
}

// rawHello returns the encoding of a handshake from rank to target in a
// world of size.
func rawHello(rank, target, size, nsocks int, mod func(*wire.Handshake)) []byte {
	h := wire.Handshake{Version: wire.HandshakeVersion, CommID: testCommID,
		Rank: uint32(rank), Target: uint32(target), Size: uint32(size), Sockets: uint16(nsocks)}
	rand.Read(h.Nonce[:])
	if mod != nil {
		mod(&h)
	}
	b := make([]byte, wire.HandshakeSize)
	h.MarshalTo(b)
	return b
}

// testKey is the handshake key of the test token.
var testKey = wire.HandshakeKey(&testToken, "")

// rawHandshake runs a dialer's side of the handshake on c as rank to
// target in a world of size, proving with the test token, and returns the
// listener's last reply: a refusal of the handshake, or its verdict on
// the proof, whose own proof it checks.
func rawHandshake(c net.Conn, rank, target, size, nsocks int, mod func(*wire.Handshake)) (wire.HandshakeReply, error) {
	return rawHandshakeKey(c, &testKey, rank, target, size, nsocks, mod)
}

func rawHandshakeKey(c net.Conn, key *[32]byte, rank, target, size, nsocks int, mod func(*wire.Handshake)) (wire.HandshakeReply, error) {
	b := rawHello(rank, target, size, nsocks, mod)
	var h wire.Handshake
	if err := h.Unmarshal(b); err != nil && !errors.Is(err, wire.ErrVersion) {
		return wire.HandshakeReply{}, err
	}
	if _, err := c.Write(b); err != nil {
		return wire.HandshakeReply{}, err
	}
	// A dialer of another version (mod sets it) takes replies in its own.
	ch, err := wire.ReadHandshakeReply(c)
	if errors.Is(err, wire.ErrVersion) && ch.Version == h.Version {
		err = nil
	}
	if err != nil || ch.Status != wire.ReplyChallenge {
		return ch, err
	}
	proof := wire.DialerProof(key, &h, &ch.Data)
	if _, err := c.Write(proof[:]); err != nil {
		return wire.HandshakeReply{}, err
	}
	rep, err := wire.ReadHandshakeReply(c)
	if errors.Is(err, wire.ErrVersion) && rep.Version == h.Version {
		err = nil
	}
	if err != nil {
		return rep, err
	}
	if want := wire.ListenerProof(key, &h, &ch.Data, rep.Status, rep.Reason); !wire.ProofEqual(&want, &rep.Data) && rep.Status != wire.ReplyRefuse {
		return rep, fmt.Errorf("the listener's %s carries no valid proof", rep.Status)
	}
	return rep, nil
}

// TestHostilePeers throws raw sockets at a live transport (rank 3 of 4) and
// checks it refuses them, logs why, never allocates what a frame claims, and
// keeps serving its legitimate peer (rank 2).
func TestHostilePeers(t *testing.T) {
	logEveryRefusal(t)
	w := newWorld(t, 4, 1)
	server := w.transport(3)
	good := w.transport(2)
	addr := w.addrs[3]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runAll(t, []*Transport{server, good}, func(tr *Transport) error { return barrier2(ctx, tr, 5-tr.Rank()) })

	dial := func(t *testing.T) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		return c
	}
	// refused runs send and expects a refusal whose reason contains want.
	refused := func(t *testing.T, send func(net.Conn) (wire.HandshakeReply, error), want string) {
		t.Helper()
		c := dial(t)
		rep, err := send(c)
		if err != nil {
			t.Fatalf("no reply: %v", err)
		}
		if rep.Status != wire.ReplyRefuse || !strings.Contains(rep.Reason, want) {
			t.Fatalf("reply %v %q, want a refusal saying %q", rep.Status, rep.Reason, want)
		}
		if !strings.Contains(w.logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, w.logs.String())
		}
	}

	t.Run("refused handshakes", func(t *testing.T) {
		garbage := make([]byte, wire.HandshakeSize)
		for i := range garbage {
			garbage[i] = byte(i*37 + 11)
		}
		raw := func(b []byte) func(net.Conn) (wire.HandshakeReply, error) {
			return func(c net.Conn) (wire.HandshakeReply, error) {
				c.Write(b)
				rep, err := wire.ReadHandshakeReply(c)
				if errors.Is(err, wire.ErrVersion) && rep.Version == uint16(b[4]) {
					err = nil // answered in the dialer's version
				}
				return rep, err
			}
		}
		as := func(rank, target, size, nsocks int, mod func(*wire.Handshake)) func(net.Conn) (wire.HandshakeReply, error) {
			return func(c net.Conn) (wire.HandshakeReply, error) { return rawHandshake(c, rank, target, size, nsocks, mod) }
		}
		wrongKey := wire.HandshakeKey(&[32]byte{'n', 'o', 'p', 'e'}, "")
		tests := []struct {
			name string
			send func(net.Conn) (wire.HandshakeReply, error)
			want string
		}{
			{"garbage", raw(garbage), "malformed handshake"},
			{"http", raw([]byte("GET / HTTP/1.1\r\nHost: example\r\nAccept: */*\r\n\r\n")), "malformed handshake"},
			{"version", raw(rawHello(0, 3, 4, 1, func(h *wire.Handshake) { h.Version = 1 })), "malformed handshake"},
			// Version 0 is what the handshake it cannot decode is left
			// holding: refused at once all the same, not challenged.
			{"version 0", raw(rawHello(0, 3, 4, 1, func(h *wire.Handshake) { h.Version = 0 })), "malformed handshake"},
			{"token", func(c net.Conn) (wire.HandshakeReply, error) {
				return rawHandshakeKey(c, &wrongKey, 0, 3, 4, 1, nil)
			}, "authentication failed"},
			{"communicator", as(0, 3, 4, 1, func(h *wire.Handshake) { h.CommID++ }), "communicator"},
			{"world size", as(0, 3, 5, 1, nil), "world of 5 ranks"},
			{"target", as(0, 2, 4, 1, nil), "meant for rank 2"},
			{"sockets", as(0, 3, 4, 2, nil), "2 paths, this rank listens on 1 addresses"},
			{"paths", as(0, 3, 4, 1, func(h *wire.Handshake) { h.Paths = 2 }), "paths 0x2 of 1"},
			{"duplicate", as(2, 3, 4, 1, nil), "already connected"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) { refused(t, tt.send, tt.want) })
		}
	})

	t.Run("higher rank dials", func(t *testing.T) {
		w2 := newWorld(t, 2, 1)
		w2.transport(0)
		c, err := net.Dial("tcp", w2.addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rep, err := rawHandshake(c, 1, 0, 2, 1, nil)
		if err != nil || rep.Status != wire.ReplyRefuse || !strings.Contains(rep.Reason, "higher ranks wait") {
			t.Fatalf("reply %+v, %v; want a refusal", rep, err)
		}
	})

	t.Run("truncated handshake", func(t *testing.T) {
		c := dial(t)
		c.Write(rawHello(0, 3, 4, 1, nil)[:10])
		c.Close()
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(w.logs.String(), "no complete handshake") {
			if time.Now().After(deadline) {
				t.Fatalf("no log line for the truncated handshake:\n%s", w.logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		// One that stays open and silent does not hold anything up.
		dial(t).Write([]byte("HCOM"))
	})

	t.Run("frame claiming 2^40 bytes", func(t *testing.T) {
		c := dial(t)
		if rep, err := rawHandshake(c, 0, 3, 4, 1, nil); err != nil || rep.Status != wire.ReplyAccept {
			t.Fatalf("handshake: %+v, %v", rep, err)
		}
		fp := fpFor(1, 1024)
		h := wire.FrameHeader{Type: wire.FrameData, Len: 1 << 40, Total: 1 << 40, Fingerprint: fp}
		b := make([]byte, wire.FrameHeaderSize)
		h.MarshalTo(b)
		c.Write(b)
		c.Write(make([]byte, 4096))

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := server.Recv(ctx, 0, &fp, make([]byte, 1024))
		runtime.ReadMemStats(&after)
		var m *errs.MismatchError
		if !errors.As(err, &m) || m.Detail != fmt.Sprintf("%d bytes vs 1024 bytes", uint64(1)<<40) {
			t.Fatalf("Recv of a 2^40-byte frame: %v, want a length mismatch", err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
			t.Errorf("Recv allocated %d bytes", grew)
		}
		if err := server.Recv(ctx, 0, &fp, make([]byte, 1024)); !errors.Is(err, errs.ErrPeerLost) {
			t.Errorf("Recv after the oversized frame: %v, want ErrPeerLost", err)
		}
		// The server closed the connection.
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("connection still open")
		}
	})

	t.Run("garbage frame", func(t *testing.T) {
		c := dial(t)
		if rep, err := rawHandshake(c, 1, 3, 4, 1, nil); err != nil || rep.Status != wire.ReplyAccept {
			t.Fatalf("handshake: %+v, %v", rep, err)
		}
		junk := make([]byte, wire.FrameHeaderSize+100)
		for i := range junk {
			junk[i] = 0xEE
		}
		c.Write(junk)
		fp := fpFor(1, 100)
		err := server.Recv(ctx, 1, &fp, make([]byte, 100))
		var perr *errs.PeerError
		if !errors.As(err, &perr) || perr.Peer != 1 || !errors.Is(err, errs.ErrPeerLost) {
			t.Fatalf("Recv of a garbage frame: %v, want PeerError{Peer: 1, Kind: ErrPeerLost}", err)
		}
		if !strings.Contains(w.logs.String(), "broke the protocol") {
			t.Errorf("no log line for the garbage frame:\n%s", w.logs.String())
		}
	})

	t.Run("truncated frame", func(t *testing.T) {
		// Rank 1's slot is taken; a fresh world for a fresh slot.
		w2 := newWorld(t, 2, 1)
		srv := w2.transport(1)
		c, err := net.Dial("tcp", w2.addrs[1])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if rep, err := rawHandshake(c, 0, 1, 2, 1, nil); err != nil || rep.Status != wire.ReplyAccept {
			t.Fatalf("handshake: %+v, %v", rep, err)
		}
		fp := fpFor(1, 100)
		h := wire.FrameHeader{Type: wire.FrameData, Len: 100, Total: 100, Fingerprint: fp}
		b := make([]byte, wire.FrameHeaderSize)
		h.MarshalTo(b)
		c.Write(append(b, make([]byte, 40)...))
		c.Close()
		err = srv.Recv(ctx, 0, &fp, make([]byte, 100))
		if !errors.Is(err, errs.ErrPeerLost) {
			t.Fatalf("Recv of a truncated frame: %v, want ErrPeerLost", err)
		}
	})

	t.Run("lead frame where a message is due", func(t *testing.T) {
		w2 := newWorld(t, 2, 1)
		srv := w2.transport(1)
		c, err := net.Dial("tcp", w2.addrs[1])
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if rep, err := rawHandshake(c, 0, 1, 2, 1, nil); err != nil || rep.Status != wire.ReplyAccept {
			t.Fatalf("handshake: %+v, %v", rep, err)
		}
		// A lead move names the connection it arrives on as the new
		// lead stream: on the lead stream itself it is out of place.
		h := wire.FrameHeader{Type: wire.FrameLead, Paths: 1, Total: 1 << 62, Len: 8}
		b := make([]byte, wire.FrameHeaderSize)
		h.MarshalTo(b)
		c.Write(append(b, make([]byte, 8)...))
		fp := fpFor(1, 100)
		err = srv.Recv(ctx, 0, &fp, make([]byte, 100))
		if !errors.Is(err, errs.ErrPeerLost) || !strings.Contains(err.Error(), "lead frame where a message was due") {
			t.Fatalf("Recv of a lead frame: %v, want ErrPeerLost naming the lead frame", err)
		}
	})

	// After all that, the legitimate pair still works.
	runAll(t, []*Transport{server, good}, func(tr *Transport) error {
		p := make([]byte, 1<<20)
		fill(p, tr.Rank(), 5)
		fp := fpFor(5, len(p))
		peer := 5 - tr.Rank()
		errc := make(chan error, 1)
		go func() { errc <- tr.Send(ctx, peer, &fp, p) }()
		in := make([]byte, len(p))
		if err := tr.Recv(ctx, peer, &fp, in); err != nil {
			return err
		}
		if err := <-errc; err != nil {
			return err
		}
		return check(in, peer, 5)
	})
}

// TestNoAllocs checks that the steady-state message path does not allocate,
// for small messages on one connection and striped large ones, under a
// context without a deadline and under one reused across messages.
func TestNoAllocs(t *testing.T) {
	deadlineCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	watchAllocs := 0.0 // per round trip, by the striped receives' watches
	if runtime.GOOS != "linux" {
		watchAllocs = 2
	}
	tests := []struct {
		name   string
		nsocks int
		size   int
		ctx    context.Context
		paths  bool    // two loopback paths: the first path's copy for a move (lead.go)
		recvs  float64 // allocations allowed per round trip
	}{
		{"small", 1, 64, context.Background(), false, 0},
		{"small with deadline", 1, 64, deadlineCtx, false, 0},
		// A frame's rest after its header is read polled (conn.Read).
		{"one socket, 48 KiB", 1, 48 << 10, deadlineCtx, false, 0},
		{"striped", 4, 1 << 20, context.Background(), false, 0},
		{"striped with deadline", 4, 1 << 20, deadlineCtx, false, 0},
		{"small over two paths", 1, 64, deadlineCtx, true, 0},
		// Stripes on both paths: Send polls TCP_INFO for their
		// acknowledgements (tcpinfo_linux.go) and allocates nothing.
		// Each Recv's watch for a repair on the first path waits in
		// an epoll instance and is woken without allocating
		// (leadwait_linux.go); woken by a deadline on the connection
		// instead, as elsewhere, each Recv allocates an *OpError.
		{"striped over two paths", 1, 1 << 20, deadlineCtx, true, watchAllocs},
		{"striped over two paths of two sockets", 2, 1 << 20, deadlineCtx, true, watchAllocs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a, b *Transport
			if tt.paths {
				trs, _ := multiPathWorld(t, 2, tt.nsocks, "127.0.0.1:%d", "127.0.0.2:%d")
				a, b = trs[0], trs[1]
			} else {
				w := newWorld(t, 2, tt.nsocks)
				a, b = w.transport(0), w.transport(1)
			}
			stop := startEcho(t, b, tt.ctx, tt.size)
			defer stop()
			p := make([]byte, tt.size)
			fp := fpFor(0, tt.size)
			pingPong := func() {
				if err := a.Send(tt.ctx, 1, &fp, p); err != nil {
					t.Fatal(err)
				}
				if err := a.Recv(tt.ctx, 1, &fp, p); err != nil {
					t.Fatal(err)
				}
			}
			pingPong()
			// The least of three counts: on a loaded machine the
			// runtime itself allocates now and then (a blocked
			// select's sudog when its P's cache is empty, a stripe
			// worker descheduled past the last stripe), which says
			// nothing about the message path. A path that allocates
			// on every round trip fails all three.
			allocs := testing.AllocsPerRun(50, pingPong)
			for i := 0; i < 2 && allocs > tt.recvs+0.5; i++ {
				allocs = min(allocs, testing.AllocsPerRun(50, pingPong))
			}
			if allocs > tt.recvs+0.5 {
				t.Errorf("%.1f allocations per round trip", allocs)
			}
		})
	}
}

// TestLeadWatchNoAllocs: the lead watch looks at the front of the other
// paths' connections several times per StallAfter for as long as a pair
// lives, beside every message; a look allocates nothing. (Its allocations
// counted against TestNoAllocs' round trips whenever a loaded machine
// made them slow.)
func TestLeadWatchNoAllocs(t *testing.T) {
	trs, _ := multiPathWorld(t, 2, 2, "127.0.0.1:%d", "127.0.0.2:%d")
	stop := startEcho(t, trs[1], context.Background(), 64)
	defer stop()
	p := make([]byte, 64)
	fp := fpFor(0, len(p))
	for range 2 { // the pair connected, each side's lead in use
		if err := trs[0].Send(context.Background(), 1, &fp, p); err != nil {
			t.Fatal(err)
		}
		if err := trs[0].Recv(context.Background(), 1, &fp, p); err != nil {
			t.Fatal(err)
		}
	}
	pr := trs[0].peers[1]
	looked := 0
	pr.candidates(func(*conn) bool { looked++; return false })
	if looked == 0 {
		t.Fatal("no connection to look at")
	}
	if allocs := testing.AllocsPerRun(100, func() { pr.findLeadFrame() }); allocs != 0 {
		t.Errorf("%.1f allocations per look at %d connections", allocs, looked)
	}
}

// startEcho makes tr send back every size-byte message it gets from rank 0.
func startEcho(t testing.TB, tr *Transport, ctx context.Context, size int) (stop func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		p := make([]byte, size)
		fp := fpFor(0, size)
		for {
			if tr.Recv(ctx, 0, &fp, p) != nil || tr.Send(ctx, 0, &fp, p) != nil {
				return
			}
		}
	}()
	return func() {
		tr.Close()
		<-done
	}
}

// logEveryRefusal makes transports created by the test log each refused
// connection on a line of its own.
func logEveryRefusal(t *testing.T) {
	old := refusalLogEvery
	refusalLogEvery = 0
	t.Cleanup(func() { refusalLogEvery = old })
}

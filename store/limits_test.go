package store

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// heapInUse returns the heap in use after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestWaitFrameAllocation sends one 16 MB Wait frame of empty keys over a
// real socket and checks that the server allocates about what it was sent,
// not sixteen bytes of string header per byte.
func TestWaitFrameAllocation(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	const n = 16 << 20
	payload := make([]byte, 0, n+binary.MaxVarintLen64)
	payload = binary.AppendUvarint(payload, n-binary.MaxVarintLen64)
	payload = payload[:len(payload)+n-binary.MaxVarintLen64] // that many empty keys
	frame := appendFrame(nil, opWait, 1, payload)
	payload = nil

	conn, br := rawConn(t, srv, true)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	go conn.Write(frame)
	expectClosed(t, conn, br) // too many keys: a protocol error
	runtime.ReadMemStats(&after)
	frame = nil
	// Reading the frame costs about twice its size (the buffer grows by
	// doubling); decoding must add little to that.
	got := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d MB Wait frame of empty keys: %d MB allocated in the process", n>>20, got>>20)
	if got > 4*n {
		t.Errorf("a %d MB Wait frame made the process allocate %d MB", n>>20, got>>20)
	}
	checkServes(t, srv)

	// The most keys a Wait may name still work, and a client splits a
	// longer list into requests of that size.
	c := dialTest(t, srv.Addr().String(), testToken)
	ctx := testCtx(t)
	keys := make([]string, maxWaitKeys+10)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i%4)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait(ctx, keys...) }()
	for i := range 4 {
		if err := c.Set(ctx, fmt.Sprint("k", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("Wait for %d keys: %v", len(keys), err)
	}
}

// TestStoreFull checks the limit on the bytes a server holds.
func TestStoreFull(t *testing.T) {
	checkNoLeaks(t)
	const limit = 1 << 20
	srv := startServer(t, ServerConfig{Token: testToken, MaxBytes: limit})
	c := dialTest(t, srv.Addr().String(), testToken)
	ctx := testCtx(t)
	v := make([]byte, 400<<10)
	for _, k := range []string{"a", "b", "a"} { // a is replaced, not counted twice
		if err := c.Set(ctx, k, v); err != nil {
			t.Fatalf("Set(%s) under the limit: %v", k, err)
		}
	}
	err := c.Set(ctx, "c", v)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "store is full") || !strings.Contains(err.Error(), "MaxBytes") {
		t.Fatalf("Set beyond MaxBytes: err = %v, want ErrTooLarge saying the store is full", err)
	}
	// Parked calls count too: many waits for long keys fill it.
	long := strings.Repeat("w", MaxKeySize)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var full error
	var mu sync.Mutex
	for i := range 100 {
		wg.Go(func() {
			if err := c.Wait(wctx, fmt.Sprint(long[:MaxKeySize-8], i)); errors.Is(err, ErrTooLarge) {
				mu.Lock()
				full = err
				mu.Unlock()
			}
		})
	}
	for {
		mu.Lock()
		f := full
		mu.Unlock()
		if f != nil {
			break
		}
		runtime.Gosched()
	}
	cancel()
	wg.Wait()
	if err := c.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx, "c", v); err != nil {
		t.Fatalf("Set after Delete made room: %v", err)
	}
	if _, err := c.Add(ctx, "n", 1); err != nil {
		t.Fatalf("Add with room left: %v", err)
	}
}

// TestMaxConns checks that authenticated clients beyond MaxConns are turned
// away with a clear reason (and retry until their context ends).
func TestMaxConns(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken, MaxConns: 2})
	dialTest(t, srv.Addr().String(), testToken)
	second := dialTest(t, srv.Addr().String(), testToken)
	// One attempt (Dial would retry until its context ends).
	_, err := dialOnce(testCtx(t), srv.Addr().String(), &ClientConfig{Token: testToken})
	if err == nil || errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "MaxConns") {
		t.Fatalf("third client: err = %v, want a refusal naming MaxConns", err)
	}
	second.Close()
	dialTest(t, srv.Addr().String(), testToken) // a place is free again
}

// dialFrom opens a TCP connection to addr from the loopback address ip,
// skipping the test where such addresses cannot be used.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		if runtime.GOOS != "linux" {
			t.Skipf("cannot dial from %s: %v", ip, err)
		}
		t.Fatal(err)
	}
	return conn
}

// TestUnauthenticatedFlood floods the server with connections that never
// authenticate, from many source addresses, and with wrong tokens, while a
// job's client goes on working and new clients still get in. The server's
// memory must stay bounded and its log short.
func TestUnauthenticatedFlood(t *testing.T) {
	checkNoLeaks(t)
	if runtime.GOOS != "linux" {
		t.Skip("needs the whole 127.0.0.0/8 on loopback")
	}
	var log syncBuffer
	srv := startServer(t, ServerConfig{Token: testToken, MaxPending: 256, MaxPendingPerSource: 32,
		Logger: slog.New(slog.NewTextHandler(&log, nil))})
	addr := srv.Addr().String()
	ctx := testCtx(t)
	job := dialTest(t, addr, testToken)
	if err := job.Set(ctx, "before", []byte("flood")); err != nil {
		t.Fatal(err)
	}
	base := heapInUse()
	goroutines := runtime.NumGoroutine()

	// 2000 silent connections from 20 addresses, and a stream of wrong
	// tokens from another.
	const sources, perSource = 20, 100
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	stop := make(chan struct{})
	var refusals sync.WaitGroup
	refused := 0
	refusals.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, 1)}}
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			c, err := dialOnceWith(dctx, d, addr, "wrong")
			cancel()
			if c != nil {
				c.Close()
			}
			if errors.Is(err, ErrUnauthorized) {
				refused++
			}
		}
	})
	for i := range sources * perSource {
		silent = append(silent, dialFrom(t, fmt.Sprintf("127.0.0.%d", 2+i%sources), addr))
		if i%200 == 199 {
			// The job keeps working during the flood, and a new client
			// gets in.
			if err := job.Set(ctx, "during", []byte{byte(i)}); err != nil {
				t.Fatalf("the job's client failed during the flood: %v", err)
			}
			c := dialTest(t, addr, testToken)
			if v, err := c.Get(ctx, "before"); err != nil || string(v) != "flood" {
				t.Fatalf("a new client during the flood: Get = %q, %v", v, err)
			}
			c.Close()
		}
	}
	close(stop)
	refusals.Wait()
	if refused == 0 {
		t.Error("no wrong-token client was refused")
	}

	grown := int64(heapInUse()) - int64(base)
	// The test's own 2000 sockets take some of this; the server may keep
	// at most 256 unauthenticated connections at a few KB each.
	const bound = 24 << 20
	t.Logf("heap grew by %d KB with %d silent connections and %d refused tokens; goroutines %d -> %d",
		grown>>10, len(silent), refused, goroutines, runtime.NumGoroutine())
	if grown > bound {
		t.Errorf("heap grew by %d MB during the flood, want under %d MB", grown>>20, bound>>20)
	}
	if n := runtime.NumGoroutine() - goroutines; n > 256+64 {
		t.Errorf("%d more goroutines during the flood, want at most about 256 (MaxPending)", n)
	}
	srv.lmu.Lock()
	pending, sourcesSeen := srv.pending.Len(), len(srv.bySource)
	srv.lmu.Unlock()
	if pending > 256 {
		t.Errorf("%d unauthenticated connections held, limit 256", pending)
	}
	for _, c := range silent {
		c.Close()
	}
	silent = nil
	t.Logf("%d unauthenticated connections from %d sources at the end", pending, sourcesSeen)

	// A few lines, not one per refusal.
	srv.Close()
	lines := strings.Count(log.String(), "\n")
	if lines > 12 {
		t.Errorf("server wrote %d log lines for %d refusals and %d surplus connections:\n%s", lines, refused, sources*perSource, log.String())
	}
	if !strings.Contains(log.String(), "not_logged_since_last") {
		t.Errorf("server log does not count the refusals it left out:\n%s", log.String())
	}
}

// dialOnceWith is dialOnce through a given dialer.
func dialOnceWith(ctx context.Context, d net.Dialer, addr, token string) (*Client, error) {
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(conn)
	if err := clientHandshake(ctx, conn, br, token); err != nil {
		conn.Close()
		return nil, err
	}
	return newClient(conn, br, addr, 0), nil
}

// TestLargeRequestsInFlight checks that large requests being received
// count against their own MaxBytes budget: while one client sends a big
// Set slowly, another's big Set is refused, not buffered.
func TestLargeRequestsInFlight(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken, MaxBytes: 1 << 20})
	value := make([]byte, 600<<10)
	frame := appendFrame(nil, opSet, 1, append(appendKey(nil, "big"), value...))
	slow, slowBr := rawConn(t, srv, true)
	half := len(frame) / 2
	if _, err := slow.Write(frame[:half]); err != nil {
		t.Fatal(err)
	}
	for { // until the server has reserved the slow request's bytes
		srv.mu.Lock()
		r := srv.reading
		srv.mu.Unlock()
		if r > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	fast, fastBr := rawConn(t, srv, true)
	go fast.Write(frame)
	f, err := readFrame(fastBr, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := responseError(f.kind, f.payload); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("a second large request while the first is received: %v, want ErrTooLarge (busy)", err)
	}
	if _, err := slow.Write(frame[half:]); err != nil {
		t.Fatal(err)
	}
	if f, err := readFrame(slowBr, 1<<20); err != nil || f.kind != statusOK {
		t.Fatalf("the first large request: status %d, %v", f.kind, err)
	}
	// The connection that was refused is still in step.
	go fast.Write(appendFrame(nil, opGet, 2, []byte("big")))
	if f, err := readFrame(fastBr, 1<<20); err != nil || f.kind != statusOK || len(f.payload) != len(value) {
		t.Fatalf("Get after the refusal: status %d, %d bytes, %v", f.kind, len(f.payload), err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.reading != 0 {
		t.Errorf("%d bytes still reserved for reading", srv.reading)
	}
}

package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer collects log output from the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// waitForLog waits until the log contains want.
func waitForLog(t *testing.T, log *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("server log lacks %q; log:\n%s", want, log.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkServes fails t unless a fresh, well-behaved client can use srv.
func checkServes(t *testing.T, srv *Server) {
	t.Helper()
	c := dialTest(t, srv.Addr().String(), testToken)
	ctx := testCtx(t)
	if err := c.Set(ctx, "still", []byte("alive")); err != nil {
		t.Fatalf("server no longer serves: %v", err)
	}
	if v, err := c.Get(ctx, "still"); err != nil || string(v) != "alive" {
		t.Fatalf("server no longer serves: Get = %q, %v", v, err)
	}
	c.Close()
}

// rawConn opens a TCP connection to srv, authenticated when auth is set,
// for tests that speak the protocol by hand.
func rawConn(t *testing.T, srv *Server, auth bool) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	br := bufio.NewReader(conn)
	if auth {
		if err := clientHandshake(testCtx(t), conn, br, testToken); err != nil {
			t.Fatal(err)
		}
	}
	return conn, br
}

// expectClosed fails t unless the server closes conn promptly.
func expectClosed(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := io.Copy(io.Discard, br)
	// EOF (nil here) or a reset both mean the server hung up.
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("server did not close the connection: %v", err)
	}
}

func TestWrongTokenRefused(t *testing.T) {
	checkNoLeaks(t)
	var log syncBuffer
	srv := startServer(t, ServerConfig{Token: testToken, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	for _, token := range []string{"", "wrong", testToken + "x"} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		c, err := Dial(ctx, srv.Addr().String(), &ClientConfig{Token: token})
		cancel()
		if !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("Dial with token %q: %v, want ErrUnauthorized", token, err)
		}
		if c != nil {
			t.Fatal("Dial returned a client with its error")
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("refusal took %v: Dial should not retry a refused token", d)
		}
	}
	waitForLog(t, &log, "wrong job token")
	waitForLog(t, &log, "refused client")
	checkServes(t, srv)
}

// TestImpostorServer checks that a client refuses a server that accepts it
// without knowing the token.
func TestImpostorServer(t *testing.T) {
	checkNoLeaks(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		if _, err := readFrame(br, maxHandshakeBody); err != nil {
			return
		}
		nonce := make([]byte, 2+nonceSize)
		binary.BigEndian.PutUint16(nonce, protoVersion)
		conn.Write(appendFrame(nil, statusOK, 0, nonce))
		if _, err := readFrame(br, maxHandshakeBody); err != nil {
			return
		}
		conn.Write(appendFrame(nil, statusOK, 0, make([]byte, proofSize))) // a proof it cannot make
		io.Copy(io.Discard, br)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := Dial(ctx, l.Addr().String(), &ClientConfig{Token: testToken}); !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("Dial to an impostor: err = %v, want ErrUnauthorized", err)
	}
}

func TestBadVersion(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	conn, br := rawConn(t, srv, false)
	conn.Write(appendFrame(nil, opHello, 0, helloPayload(99, make([]byte, nonceSize))))
	f, err := readFrame(br, maxHandshakeBody)
	if err != nil {
		t.Fatal(err)
	}
	if f.kind != statusBadVersion || !strings.Contains(string(f.payload), "version 99") {
		t.Fatalf("response to version 99: status %d %q", f.kind, f.payload)
	}
	expectClosed(t, conn, br)
	checkServes(t, srv)
}

// TestBadFrames sends broken input, before and after authentication, and
// checks that the server drops the connection, stays up and keeps serving.
func TestBadFrames(t *testing.T) {
	checkNoLeaks(t)
	huge := binary.AppendUvarint(nil, 1<<40)
	tests := []struct {
		name string
		auth bool
		data []byte
	}{
		{"garbage before hello", false, []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		{"huge frame before hello", false, append(huge, opHello, 0)},
		{"hello too long", false, appendFrame(nil, opHello, 0, make([]byte, maxHandshakeBody))},
		{"wrong first request", false, appendFrame(nil, opSet, 1, appendKey(nil, "k"))},
		{"truncated hello", false, appendFrame(nil, opHello, 0, helloPayload(protoVersion, make([]byte, nonceSize)))[:20]},
		{"garbage", true, bytes.Repeat([]byte{0xff}, 64)},
		{"huge frame", true, append(huge, opSet, 1)},
		{"frame over the value limit", true, append(binary.AppendUvarint(nil, frameSlack+DefaultMaxValueSize+1), opSet, 1)},
		{"truncated frame", true, appendFrame(nil, opSet, 7, append(appendKey(nil, "k"), make([]byte, 100)...))[:50]},
		{"truncated big frame", true, append(binary.AppendUvarint(nil, DefaultMaxValueSize), opSet, 1, 1, 'k', 0, 0, 0)},
		{"empty frame", true, []byte{0}},
		{"unknown request", true, appendFrame(nil, 200, 1, nil)},
		{"bad key length", true, appendFrame(nil, opSet, 1, binary.AppendUvarint(nil, 1<<20))},
		{"key past the end", true, appendFrame(nil, opSet, 1, []byte{10, 'a'})},
		{"add without delta", true, appendFrame(nil, opAdd, 1, appendKey(nil, "k"))},
		{"wait count lies", true, appendFrame(nil, opWait, 1, binary.AppendUvarint(nil, 1<<62))},
		{"wait trailing bytes", true, appendFrame(nil, opWait, 1, append(encodeWait([]string{"a"}), 0))},
		{"get key too long", true, appendFrame(nil, opGet, 1, make([]byte, MaxKeySize+1))},
		{"handshake again", true, appendFrame(nil, opHello, 0, helloPayload(protoVersion, make([]byte, nonceSize)))},
	}
	var log syncBuffer
	srv := startServer(t, ServerConfig{Token: testToken, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			conn, br := rawConn(t, srv, tt.auth)
			if _, err := conn.Write(tt.data); err != nil {
				t.Fatal(err)
			}
			conn.(*net.TCPConn).CloseWrite() // a truncated frame stays truncated
			expectClosed(t, conn, br)
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
				t.Errorf("server allocated %d MiB for %d bytes of input", grew>>20, len(tt.data))
			}
			checkServes(t, srv)
		})
	}
	if !strings.Contains(log.String(), "dropping connection") {
		t.Errorf("server log does not mention dropped connections:\n%s", log.String())
	}
}

// TestServerSideErrors checks errors the server reports without dropping
// the connection.
func TestServerSideErrors(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken, MaxValueSize: 1024})
	ctx := testCtx(t)
	// The client's own limit is larger, so the server judges.
	c, err := Dial(ctx, srv.Addr().String(), &ClientConfig{Token: testToken, MaxValueSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Set(ctx, "v", make([]byte, 1025)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Set of 1025 bytes on a 1024-byte server: err = %v, want ErrTooLarge", err)
	}
	if err := c.Set(ctx, "v", make([]byte, 1024)); err != nil {
		t.Fatalf("Set of 1024 bytes after a refused Set: %v", err)
	}
	// The client refuses values beyond its own limit before sending.
	if err := c.Set(ctx, "v", make([]byte, 4097)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Set of 4097 bytes on a 4096-byte client: err = %v, want ErrTooLarge", err)
	}
	many := make([]string, 1000)
	for i := range many {
		many[i] = strings.Repeat("k", 10)
	}
	if err := c.Wait(ctx, many...); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Wait for 1000 keys on a small client: err = %v, want ErrTooLarge", err)
	}
	if v, err := c.Get(ctx, "v"); err != nil || len(v) != 1024 {
		t.Fatalf("Get = %d bytes, %v", len(v), err)
	}
}

// TestMultiplexing checks that calls blocked on one client do not hold up
// the others on the same client.
func TestMultiplexing(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	c := dialTest(t, srv.Addr().String(), testToken)
	ctx := testCtx(t)
	const blocked = 20
	results := make(chan []byte, blocked)
	for i := range blocked {
		go func() {
			v, _ := c.Get(ctx, "gate")
			results <- append(v, byte(i))
		}()
	}
	for i := range 50 {
		if _, err := c.Add(ctx, "busy", 1); err != nil {
			t.Fatalf("Add %d while Gets block: %v", i, err)
		}
	}
	if err := c.Set(ctx, "gate", []byte("open")); err != nil {
		t.Fatal(err)
	}
	for range blocked {
		select {
		case v := <-results:
			if !bytes.HasPrefix(v, []byte("open")) {
				t.Fatalf("blocked Get returned %q", v)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("blocked Gets not released by Set")
		}
	}
}

// TestCancelledWaitsAreDropped checks that the server forgets the waits a
// client gave up on.
func TestCancelledWaitsAreDropped(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	c := dialTest(t, srv.Addr().String(), testToken)
	for range 10 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		c.Wait(ctx, "a", "b")
		cancel()
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		srv.mu.Lock()
		n := len(srv.waiters)
		srv.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server still holds waiters for %d keys after their callers gave up", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestServerGoneWhileWaiting(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	c := dialTest(t, srv.Addr().String(), testToken)
	ctx := testCtx(t)
	const waiters = 3
	errc := make(chan error, waiters)
	for range waiters {
		go func() { _, err := c.Get(ctx, "never"); errc <- err }()
	}
	// Close once the server holds all three Gets parked.
	for deadline := time.Now().Add(time.Minute); ; {
		srv.mu.Lock()
		n := len(srv.waiters["never"])
		srv.mu.Unlock()
		if n == waiters {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server holds %d of %d Gets", n, waiters)
		}
		time.Sleep(time.Millisecond) // polls a condition; acts only once it holds
	}
	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Server.Close took %v", d)
	}
	for range waiters {
		select {
		case err := <-errc:
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("Get when the server went away: err = %v, want ErrClosed", err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Get still blocked 2s after the server went away")
		}
	}
	start = time.Now()
	if err := c.Set(ctx, "k", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Set after the server went away: err = %v, want ErrClosed", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("failing Set took %v", d)
	}
	if err := srv.Listen("127.0.0.1:0"); !errors.Is(err, ErrClosed) {
		t.Errorf("Listen after Close: err = %v, want ErrClosed", err)
	}
}

func TestDialRetries(t *testing.T) {
	checkNoLeaks(t)
	// Find a free port, then start the server on it only after Dial began.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		c   *Client
		err error
	}
	res := make(chan result, 1)
	// Start the server only once Dial has failed and is about to retry.
	retrying := make(chan struct{})
	var once sync.Once
	testHookDialRetry = func(error) { once.Do(func() { close(retrying) }) }
	go func() {
		c, err := Dial(ctx, addr, &ClientConfig{Token: testToken})
		res <- result{c, err}
	}()
	var r result
	select {
	case <-retrying:
	case r = <-res:
		t.Fatalf("Dial to nobody returned before retrying: %v, %v", r.c, r.err)
	}
	srv, err := NewServer(ServerConfig{Token: testToken, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Listen(addr); err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	r = <-res
	testHookDialRetry = nil // Dial has returned
	if r.err != nil {
		t.Fatalf("Dial to a late server: %v", r.err)
	}
	defer r.c.Close()
	if err := r.c.Set(ctx, "k", nil); err != nil {
		t.Fatal(err)
	}

	// Nobody listening at all: Dial gives up when ctx ends.
	short, cancel2 := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel2()
	start := time.Now()
	_, err = Dial(short, "127.0.0.1:1", nil)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial to nobody: err = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Dial overran its deadline by %v", d-150*time.Millisecond)
	}
}

// TestSilentServer checks that Dial's deadline covers a peer that accepts
// but never answers the handshake.
func TestSilentServer(t *testing.T) {
	checkNoLeaks(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer l.Close()
	wg.Go(func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { io.Copy(io.Discard, conn); conn.Close() })
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := Dial(ctx, l.Addr().String(), nil); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Dial to a silent server: err = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Dial to a silent server took %v", d)
	}
}

// TestServe covers Serve on a caller's listener and its result after Close.
func TestServe(t *testing.T) {
	checkNoLeaks(t)
	srv, err := NewServer(ServerConfig{Token: testToken, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if srv.Addr() != nil {
		t.Fatalf("Addr before listening = %v, want nil", srv.Addr())
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	c := dialTest(t, l.Addr().String(), testToken)
	if err := c.Set(testCtx(t), "k", nil); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if err := <-served; !errors.Is(err, ErrClosed) {
		t.Fatalf("Serve after Close = %v, want ErrClosed", err)
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := NewServer(ServerConfig{MaxValueSize: -1}); err == nil {
		t.Error("NewServer accepted a negative MaxValueSize")
	}
	if _, err := NewServer(ServerConfig{HandshakeTimeout: -1}); err == nil {
		t.Error("NewServer accepted a negative HandshakeTimeout")
	}
	if _, err := Dial(context.Background(), "127.0.0.1:1", &ClientConfig{MaxValueSize: -1}); err == nil {
		t.Error("Dial accepted a negative MaxValueSize")
	}
}

// TestHandshakeTimeout checks that a connection that never authenticates
// is dropped.
func TestHandshakeTimeout(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken, HandshakeTimeout: 100 * time.Millisecond})
	conn, br := rawConn(t, srv, false)
	start := time.Now()
	expectClosed(t, conn, br)
	if d := time.Since(start); d < 50*time.Millisecond || d > 2*time.Second {
		t.Errorf("idle unauthenticated connection dropped after %v, want about 100ms", d)
	}
}

// TestClientThatDoesNotRead checks that a client that sends requests but
// never reads the responses stalls only itself.
func TestClientThatDoesNotRead(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	ctx := testCtx(t)
	big := bytes.Repeat([]byte("x"), 1<<20)
	if err := dialTest(t, srv.Addr().String(), testToken).Set(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	conn, _ := rawConn(t, srv, true)
	get := appendFrame(nil, opGet, 1, []byte("big"))
	var flood []byte
	for range 1000 {
		flood = append(flood, get...)
	}
	// Go on once the server has stopped reading from this client because
	// its responses pile up unread.
	stalled := make(chan struct{})
	var once sync.Once
	testHookNoRoom = func() { once.Do(func() { close(stalled) }) }
	t.Cleanup(func() { testHookNoRoom = nil }) // after the server's Close
	wrote := make(chan error, 1)
	go func() {
		conn.SetWriteDeadline(time.Now().Add(time.Minute))
		_, err := conn.Write(flood) // asks for 1000 MiB of responses
		wrote <- err
	}()
	select {
	case <-stalled:
	case <-time.After(time.Minute):
		t.Fatal("the server never stopped reading from a client that reads nothing")
	}
	checkServes(t, srv)
	start := time.Now()
	srv.Close()
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close with a stalled client took %v", d)
	}
	<-wrote
}

// TestClientProvesFirst checks that a stranger who connects learns nothing
// derived from the token: the server answers a hello with its nonce only,
// and answers a wrong proof with a refusal, never with its own proof.
func TestClientProvesFirst(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	conn, br := rawConn(t, srv, false)
	clientNonce := bytes.Repeat([]byte{7}, nonceSize)
	conn.Write(appendFrame(nil, opHello, 0, helloPayload(protoVersion, clientNonce)))
	hello, err := readFrame(br, maxHandshakeBody)
	if err != nil {
		t.Fatal(err)
	}
	if hello.kind != statusOK || len(hello.payload) != 2+nonceSize {
		t.Fatalf("answer to a hello: status %d, %d bytes; want the version and a nonce only", hello.kind, len(hello.payload))
	}
	serverNonce := hello.payload[2:]
	conn.Write(appendFrame(nil, opAuth, 0, proof("guess", "client", clientNonce, serverNonce)))
	verdict, err := readFrame(br, maxHandshakeBody)
	if err != nil {
		t.Fatal(err)
	}
	if verdict.kind != statusUnauthorized || bytes.Equal(verdict.payload, proof(testToken, "server", clientNonce, serverNonce)) {
		t.Fatalf("answer to a wrong proof: status %d %q", verdict.kind, verdict.payload)
	}
	expectClosed(t, conn, br)
}

// TestReplayedProofRefused records a good client's handshake and replays
// its proof on a new connection: the server's fresh nonce makes it useless.
func TestReplayedProofRefused(t *testing.T) {
	checkNoLeaks(t)
	srv := startServer(t, ServerConfig{Token: testToken})
	clientNonce := bytes.Repeat([]byte{9}, nonceSize)
	var recorded []byte
	for i := range 2 {
		conn, br := rawConn(t, srv, false)
		conn.Write(appendFrame(nil, opHello, 0, helloPayload(protoVersion, clientNonce)))
		hello, err := readFrame(br, maxHandshakeBody)
		if err != nil || hello.kind != statusOK {
			t.Fatalf("hello: %v, status %d", err, hello.kind)
		}
		if i == 0 {
			recorded = proof(testToken, "client", clientNonce, hello.payload[2:])
		}
		conn.Write(appendFrame(nil, opAuth, 0, recorded))
		verdict, err := readFrame(br, maxHandshakeBody)
		if err != nil {
			t.Fatal(err)
		}
		want := statusOK
		if i == 1 {
			want = statusUnauthorized
		}
		if verdict.kind != want {
			t.Fatalf("attempt %d with the recorded proof: status %d, want %d", i, verdict.kind, want)
		}
	}
}

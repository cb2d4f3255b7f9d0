package store

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"sync"
	"time"
)

// ClientConfig configures a Client. A nil *ClientConfig means the zero
// value: no token and default limits.
type ClientConfig struct {
	// Token is the job token; it must equal the server's.
	Token string
	// MaxValueSize is the largest value, in bytes, the client sends or
	// accepts. Zero means DefaultMaxValueSize. It should match the
	// server's: a larger value from the server breaks the connection.
	MaxValueSize int
}

// handshakeTimeout bounds one connection attempt's handshake, so that Dial
// moves on from a peer that accepts but never answers.
const handshakeTimeout = 10 * time.Second

// Client is a connection to a TCP store Server. It implements Store.
//
// A Client is safe for concurrent use. Its calls share one connection:
// each request carries an id and responses may come back in any order, so a
// Get that waits for a key does not hold up the calls behind it. When a
// call's context ends while it waits, the client tells the server to drop
// the call and returns at once.
//
// If the connection to the server is lost, every pending and later call fails
// with an error wrapping ErrClosed; the client does not reconnect. The same
// happens, to keep the byte stream intact, in the rare case that a call's
// context ends while its request is only partly written (a large value to a
// server that is not reading).
type Client struct {
	conn     net.Conn
	addr     string
	maxValue int

	wsem chan struct{} // holds one token while a goroutine writes a frame

	mu      sync.Mutex
	pending map[uint64]chan frame // nil once the client has failed
	nextID  uint64
	err     error         // why the client stopped; set once
	done    chan struct{} // closed when err is set

	wg sync.WaitGroup // reader and cancel senders
}

// Dial connects to the store server at addr (host:port) and authenticates
// with cfg.Token. Until ctx ends it keeps retrying, with growing pauses, a
// server that is not up yet; a server that refuses the token, or speaks
// another protocol version, fails the call at once.
func Dial(ctx context.Context, addr string, cfg *ClientConfig) (*Client, error) {
	if cfg == nil {
		cfg = &ClientConfig{}
	}
	if cfg.MaxValueSize < 0 {
		return nil, fmt.Errorf("store: negative MaxValueSize %d", cfg.MaxValueSize)
	}
	pause := 10 * time.Millisecond
	for {
		c, err := dialOnce(ctx, addr, cfg)
		if err == nil {
			return c, nil
		}
		if errors.Is(err, ErrUnauthorized) || errors.Is(err, errVersion) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (last attempt: %v)", ctxError("dial", addr, ctx.Err()), err)
		}
		if testHookDialRetry != nil {
			testHookDialRetry(err)
		}
		// Full jitter keeps many ranks from knocking in lockstep.
		t := time.NewTimer(pause/2 + mrand.N(pause/2+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (last attempt: %v)", ctxError("dial", addr, ctx.Err()), err)
		}
		pause = min(2*pause, time.Second)
	}
}

var errVersion = errors.New("store: protocol version mismatch")

// testHookDialRetry, when set (by tests only), runs each time Dial is
// about to pause before retrying a failed attempt.
var testHookDialRetry func(err error)

func dialOnce(ctx context.Context, addr string, cfg *ClientConfig) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 32<<10)
	if err := clientHandshake(ctx, conn, br, cfg.Token); err != nil {
		conn.Close()
		return nil, err
	}
	return newClient(conn, br, addr, cfg.MaxValueSize), nil
}

// clientHandshake authenticates conn. See the protocol description.
func clientHandshake(ctx context.Context, conn net.Conn, br *bufio.Reader, token string) error {
	deadline := time.Now().Add(handshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	clientNonce := make([]byte, nonceSize)
	rand.Read(clientNonce)
	if _, err := conn.Write(appendFrame(nil, opHello, 0, helloPayload(protoVersion, clientNonce))); err != nil {
		return err
	}
	hello, err := readFrame(br, maxHandshakeBody)
	if err != nil {
		return err
	}
	if hello.kind == statusBadVersion {
		return fmt.Errorf("%w: %w", errVersion, responseError(hello.kind, hello.payload))
	}
	if hello.kind != statusOK || len(hello.payload) != 2+nonceSize {
		return fmt.Errorf("%w: unexpected handshake response (status %d, %d bytes)", errMalformed, hello.kind, len(hello.payload))
	}
	serverNonce := hello.payload[2:]
	if _, err := conn.Write(appendFrame(nil, opAuth, 0, proof(token, "client", clientNonce, serverNonce))); err != nil {
		return err
	}
	verdict, err := readFrame(br, maxHandshakeBody)
	if err != nil {
		return err
	}
	if verdict.kind == statusUnauthorized {
		return fmt.Errorf("%w: server %s refused the job token", ErrUnauthorized, conn.RemoteAddr())
	}
	if verdict.kind != statusOK {
		return responseError(verdict.kind, verdict.payload)
	}
	if len(verdict.payload) != proofSize || !hmac.Equal(verdict.payload, proof(token, "server", clientNonce, serverNonce)) {
		return fmt.Errorf("%w: server %s does not know the job token", ErrUnauthorized, conn.RemoteAddr())
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return conn.SetDeadline(time.Time{})
}

// newClient starts a client on an authenticated connection.
func newClient(conn net.Conn, br *bufio.Reader, addr string, maxValue int) *Client {
	if maxValue == 0 {
		maxValue = DefaultMaxValueSize
	}
	c := &Client{
		conn:     conn,
		addr:     addr,
		maxValue: maxValue,
		wsem:     make(chan struct{}, 1),
		pending:  make(map[uint64]chan frame),
		nextID:   1,
		done:     make(chan struct{}),
	}
	c.wg.Go(func() { c.readLoop(br) })
	return c
}

// readLoop delivers responses to their callers until the connection fails.
func (c *Client) readLoop(br *bufio.Reader) {
	maxBody := 1 + binary.MaxVarintLen64 + max(c.maxValue, maxErrorMessage)
	for {
		f, err := readFrame(br, maxBody)
		if err != nil {
			c.fail(fmt.Errorf("%w: connection to server %s lost: %w", ErrClosed, c.addr, err))
			return
		}
		c.mu.Lock()
		ch := c.pending[f.id]
		delete(c.pending, f.id)
		c.mu.Unlock()
		if ch != nil {
			ch <- f // buffered; never blocks
		}
	}
}

// fail stops the client with err, failing every pending call.
func (c *Client) fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
		c.pending = nil
		close(c.done)
	}
	c.mu.Unlock()
	c.conn.Close()
}

func (c *Client) failure(op, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Errorf("%w (%s %q)", c.err, op, key)
}

// Close closes the connection. Pending and later calls fail with ErrClosed.
func (c *Client) Close() error {
	c.fail(fmt.Errorf("%w: client closed", ErrClosed))
	c.wg.Wait()
	return nil
}

// send writes one frame. If ctx ends while the frame is half written, the
// stream can no longer be trusted and the client fails.
func (c *Client) send(ctx context.Context, kind byte, id uint64, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	bufs := make(net.Buffers, 0, 1+len(parts))
	bufs = append(bufs, appendHeader(nil, kind, id, n))
	bufs = append(bufs, parts...)

	select {
	case c.wsem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return errClientDone
	}
	defer func() { <-c.wsem }()

	var (
		mu            sync.Mutex
		written, shot bool
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !written {
			shot = true
			c.conn.SetWriteDeadline(time.Unix(1, 0))
		}
	})
	_, err := bufs.WriteTo(c.conn)
	mu.Lock()
	written = true
	mu.Unlock()
	stop()
	if shot {
		if err == nil {
			c.conn.SetWriteDeadline(time.Time{})
		} else {
			c.fail(fmt.Errorf("%w: a call was cancelled in the middle of sending its request", ErrClosed))
			return ctx.Err()
		}
	}
	if err != nil {
		c.fail(fmt.Errorf("%w: connection to server %s lost: %w", ErrClosed, c.addr, err))
		return errClientDone
	}
	return nil
}

// errClientDone tells call to report the client's failure.
var errClientDone = errors.New("client done")

// call sends a request and waits for its response. Blocking calls (Get,
// Wait) are cancelled on the server when ctx ends.
func (c *Client) call(ctx context.Context, op string, key string, kind byte, parts ...[]byte) (frame, error) {
	if err := ctx.Err(); err != nil {
		return frame{}, ctxError(op, key, err)
	}
	ch := make(chan frame, 1)
	c.mu.Lock()
	if c.pending == nil {
		c.mu.Unlock()
		return frame{}, c.failure(op, key)
	}
	id := c.nextID
	c.nextID++
	c.pending[id] = ch
	c.mu.Unlock()

	if err := c.send(ctx, kind, id, parts...); err != nil {
		c.forget(id)
		if err == errClientDone {
			return frame{}, c.failure(op, key)
		}
		return frame{}, ctxError(op, key, err)
	}
	select {
	case f := <-ch:
		return f, nil
	case <-c.done:
		return frame{}, c.failure(op, key)
	case <-ctx.Done():
	}
	if !c.forget(id) {
		// The response arrived (or the client failed) meanwhile.
		select {
		case f := <-ch:
			return f, nil
		case <-c.done:
			return frame{}, c.failure(op, key)
		}
	}
	if kind == opGet || kind == opWait {
		// Tell the server in the background. Starting the sender under
		// c.mu, only while the client is alive, orders it before Close's
		// wg.Wait.
		c.mu.Lock()
		if c.err == nil {
			c.wg.Go(func() { c.send(context.Background(), opCancel, id) })
		}
		c.mu.Unlock()
	}
	return frame{}, ctxError(op, key, ctx.Err())
}

// forget drops a pending call; it reports whether the call was still
// pending.
func (c *Client) forget(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pending[id]; !ok {
		return false
	}
	delete(c.pending, id)
	return true
}

func (c *Client) checkValue(op, key string, value []byte) error {
	if err := checkKey(op, key); err != nil {
		return err
	}
	if len(value) > c.maxValue {
		return fmt.Errorf("%w: %s %q: value of %d bytes exceeds %d", ErrTooLarge, op, key, len(value), c.maxValue)
	}
	return nil
}

// Set implements Store.
func (c *Client) Set(ctx context.Context, key string, value []byte) error {
	if err := c.checkValue("set", key, value); err != nil {
		return err
	}
	f, err := c.call(ctx, "set", key, opSet, appendKey(nil, key), value)
	if err != nil {
		return err
	}
	return annotate("set", key, responseError(f.kind, f.payload))
}

// Get implements Store.
func (c *Client) Get(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey("get", key); err != nil {
		return nil, err
	}
	f, err := c.call(ctx, "get", key, opGet, []byte(key))
	if err != nil {
		return nil, err
	}
	if err := responseError(f.kind, f.payload); err != nil {
		return nil, annotate("get", key, err)
	}
	return f.payload, nil
}

// Add implements Store.
func (c *Client) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := checkKey("add", key); err != nil {
		return 0, err
	}
	f, err := c.call(ctx, "add", key, opAdd, encodeAdd(key, delta))
	if err != nil {
		return 0, err
	}
	return decodeAddResponse(f)
}

// decodeAddResponse returns the new counter value an Add response carries.
func decodeAddResponse(f frame) (int64, error) {
	if err := responseError(f.kind, f.payload); err != nil {
		return 0, fmt.Errorf("store: add: %w", err)
	}
	if len(f.payload) != 8 {
		return 0, fmt.Errorf("%w: add response of %d bytes", errMalformed, len(f.payload))
	}
	return int64(binary.BigEndian.Uint64(f.payload)), nil
}

// Wait implements Store.
func (c *Client) Wait(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	for len(keys) > maxWaitKeys {
		// The server takes at most maxWaitKeys per request.
		if err := c.Wait(ctx, keys[:maxWaitKeys]...); err != nil {
			return err
		}
		keys = keys[maxWaitKeys:]
	}
	size := binary.MaxVarintLen64
	for _, k := range keys {
		if err := checkKey("wait", k); err != nil {
			return err
		}
		size += binary.MaxVarintLen64 + len(k)
	}
	if size > frameSlack+c.maxValue {
		return fmt.Errorf("%w: wait for %d keys: request of %d bytes", ErrTooLarge, len(keys), size)
	}
	f, err := c.call(ctx, "wait", keys[0], opWait, encodeWait(keys))
	if err != nil {
		return err
	}
	return annotate("wait", keys[0], responseError(f.kind, f.payload))
}

// Delete implements Store.
func (c *Client) Delete(ctx context.Context, key string) error {
	if err := checkKey("delete", key); err != nil {
		return err
	}
	f, err := c.call(ctx, "delete", key, opDelete, []byte(key))
	if err != nil {
		return err
	}
	return annotate("delete", key, responseError(f.kind, f.payload))
}

func annotate(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w (%s %q)", err, op, key)
}

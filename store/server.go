package store

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"
)

// ServerConfig configures a Server. The zero value is usable: no token,
// default limits, slog.Default for logs.
type ServerConfig struct {
	// Token is the job token, a secret shared by every rank of the job.
	// Clients that do not know it are refused.
	Token string
	// MaxValueSize is the largest value, in bytes, that Set accepts.
	// Zero means DefaultMaxValueSize.
	MaxValueSize int
	// HandshakeTimeout bounds how long a new connection may take to
	// authenticate. Zero means 10 seconds.
	HandshakeTimeout time.Duration
	// Logger receives refused clients and protocol errors. Nil means
	// slog.Default().
	Logger *slog.Logger
}

const (
	defaultHandshakeTimeout = 10 * time.Second
	// maxPendingPerConn bounds the Get and Wait calls one connection may
	// have parked on the server.
	maxPendingPerConn = 1 << 16
	// maxQueuedPerConn is how many responses may wait to be written to a
	// connection before the server stops reading its requests.
	maxQueuedPerConn = 256
)

// Server is the TCP store server. It keeps the data in memory and answers
// any number of clients; Get and Wait park on the server until their keys
// are set, so waiting clients cost no traffic.
//
// Create one with NewServer, start it with Listen or Serve, stop it with
// Close.
type Server struct {
	token            string
	maxValue         int
	handshakeTimeout time.Duration
	log              *slog.Logger

	mu      sync.Mutex // guards data, waiters and every serverConn.pending
	data    map[string][]byte
	waiters map[string]map[*waiter]struct{}

	lmu       sync.Mutex // guards listeners, conns, closed
	listeners []net.Listener
	conns     map[*serverConn]struct{}
	closed    bool
	done      chan struct{} // closed by Close
	wg        sync.WaitGroup
}

// waiter is a Get or Wait parked until its keys are set.
type waiter struct {
	c       *serverConn
	id      uint64
	op      byte     // opGet or opWait
	keys    []string // distinct
	missing int      // keys not yet set
}

// NewServer returns a Server configured by cfg. It does not listen yet.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.MaxValueSize < 0 {
		return nil, fmt.Errorf("store: negative MaxValueSize %d", cfg.MaxValueSize)
	}
	if cfg.HandshakeTimeout < 0 {
		return nil, fmt.Errorf("store: negative HandshakeTimeout %v", cfg.HandshakeTimeout)
	}
	s := &Server{
		token:            cfg.Token,
		maxValue:         cfg.MaxValueSize,
		handshakeTimeout: cfg.HandshakeTimeout,
		log:              cfg.Logger,
		data:             make(map[string][]byte),
		waiters:          make(map[string]map[*waiter]struct{}),
		conns:            make(map[*serverConn]struct{}),
		done:             make(chan struct{}),
	}
	if s.maxValue == 0 {
		s.maxValue = DefaultMaxValueSize
	}
	if s.handshakeTimeout == 0 {
		s.handshakeTimeout = defaultHandshakeTimeout
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s, nil
}

// Listen listens on the TCP address addr (":0" picks a free port) and serves
// it in the background until Close. Addr reports the address.
func (s *Server) Listen(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.closed {
		l.Close()
		return ErrClosed
	}
	s.listeners = append(s.listeners, l)
	s.wg.Go(func() { s.acceptLoop(l) })
	return nil
}

// Serve accepts connections on l until Close, and then returns ErrClosed.
// It closes l when it returns.
func (s *Server) Serve(l net.Listener) error {
	if !s.addListener(l) {
		l.Close()
		return ErrClosed
	}
	return s.acceptLoop(l)
}

// Addr returns the address of the server's first listener, or nil when it
// has none.
func (s *Server) Addr() net.Addr {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if len(s.listeners) == 0 {
		return nil
	}
	return s.listeners[0].Addr()
}

// Close stops the server: it closes its listeners and every client
// connection, so that clients fail promptly, and returns once all of the
// server's goroutines have ended.
func (s *Server) Close() error {
	s.lmu.Lock()
	if s.closed {
		s.lmu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	listeners := s.listeners
	conns := make([]*serverConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.lmu.Unlock()

	for _, l := range listeners {
		l.Close()
	}
	for _, c := range conns {
		c.close()
	}
	s.wg.Wait()
	return nil
}

func (s *Server) addListener(l net.Listener) bool {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.closed {
		return false
	}
	s.listeners = append(s.listeners, l)
	return true
}

func (s *Server) acceptLoop(l net.Listener) error {
	defer l.Close()
	var delay time.Duration
	for {
		conn, err := l.Accept()
		if err != nil {
			select {
			case <-s.done:
				return ErrClosed
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("store: %w", err)
			}
			// Probably out of file descriptors or similar: back off.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("store: accept failed", "err", err, "retry_in", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return ErrClosed
			}
			continue
		}
		delay = 0
		if !s.startConn(conn) {
			conn.Close()
			return ErrClosed
		}
	}
}

// startConn registers conn and serves it in a new goroutine.
func (s *Server) startConn(conn net.Conn) bool {
	c := newServerConn(s, conn)
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Go(func() { s.serveConn(c) })
	return true
}

// serverConn is the server's side of one client connection.
type serverConn struct {
	s      *Server
	conn   net.Conn
	remote string

	mu     sync.Mutex // guards queue and closed
	cond   sync.Cond  // signalled when queue changes or the conn closes
	queue  []outFrame // responses waiting for the writer
	closed bool

	pending map[uint64]*waiter // guarded by s.mu
}

// outFrame is a response: header and payload, the latter possibly shared
// with the store's data (values are never modified in place).
type outFrame struct {
	hdr     []byte
	payload []byte
}

func newServerConn(s *Server, conn net.Conn) *serverConn {
	c := &serverConn{s: s, conn: conn, pending: make(map[uint64]*waiter)}
	if a := conn.RemoteAddr(); a != nil {
		c.remote = a.String()
	}
	c.cond.L = &c.mu
	return c
}

func (c *serverConn) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.queue = nil
		c.cond.Broadcast()
	}
	c.mu.Unlock()
	c.conn.Close()
}

// reply queues a response; it never blocks.
func (c *serverConn) reply(id uint64, status byte, payload []byte) {
	hdr := appendHeader(make([]byte, 0, 2*binary.MaxVarintLen64+1), status, id, len(payload))
	c.mu.Lock()
	if !c.closed {
		c.queue = append(c.queue, outFrame{hdr, payload})
		c.cond.Broadcast()
	}
	c.mu.Unlock()
}

func (c *serverConn) replyError(id uint64, status byte, format string, args ...any) {
	c.reply(id, status, fmt.Appendf(nil, format, args...))
}

// waitRoom blocks while the connection has too many unwritten responses,
// so a client that does not read cannot make the server buffer without
// bound. It reports whether the connection is still open.
func (c *serverConn) waitRoom() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queue) >= maxQueuedPerConn && !c.closed {
		c.cond.Wait()
	}
	return !c.closed
}

// writeLoop writes queued responses until the connection closes.
func (c *serverConn) writeLoop() {
	bw := bufio.NewWriterSize(c.conn, 32<<10)
	var batch []outFrame
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closed {
			c.cond.Wait()
		}
		if c.closed {
			c.mu.Unlock()
			return
		}
		batch, c.queue = c.queue, batch[:0]
		c.cond.Broadcast() // room for the reader
		c.mu.Unlock()

		for _, f := range batch {
			bw.Write(f.hdr)
			bw.Write(f.payload)
		}
		clear(batch)
		if err := bw.Flush(); err != nil {
			c.close()
			return
		}
	}
}

func (s *Server) serveConn(c *serverConn) {
	defer s.dropConn(c)
	defer c.close()
	br := bufio.NewReaderSize(c.conn, 32<<10)
	if err := s.handshake(c, br); err != nil {
		switch {
		case errors.Is(err, ErrUnauthorized):
			s.log.Warn("store: refused client", "remote", c.remote, "reason", err)
		case c.isClosed():
		case errors.Is(err, errMalformed):
			s.log.Warn("store: handshake failed", "remote", c.remote, "err", err)
		default:
			s.log.Debug("store: handshake failed", "remote", c.remote, "err", err)
		}
		return
	}
	s.serveRequests(c, br)
}

// serveRequests runs an authenticated connection: it starts the writer and
// handles requests until the connection ends or breaks the protocol.
func (s *Server) serveRequests(c *serverConn, br *bufio.Reader) {
	s.wg.Go(c.writeLoop)
	maxBody := frameSlack + s.maxValue
	for {
		f, err := readFrame(br, maxBody)
		if err != nil {
			switch {
			case err == io.EOF || c.isClosed():
			case errors.Is(err, errMalformed):
				s.log.Warn("store: dropping connection", "remote", c.remote, "err", err)
			default:
				s.log.Debug("store: connection failed", "remote", c.remote, "err", err)
			}
			return
		}
		if err := s.handle(c, f); err != nil {
			s.log.Warn("store: dropping connection", "remote", c.remote, "err", err)
			return
		}
		if !c.waitRoom() {
			return
		}
	}
}

func (c *serverConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// dropConn forgets a finished connection and its parked calls.
func (s *Server) dropConn(c *serverConn) {
	s.mu.Lock()
	for _, w := range c.pending {
		s.unpark(w)
	}
	s.mu.Unlock()
	s.lmu.Lock()
	delete(s.conns, c)
	s.lmu.Unlock()
}

// handshake authenticates the client. See the protocol description.
func (s *Server) handshake(c *serverConn, br *bufio.Reader) error {
	c.conn.SetDeadline(time.Now().Add(s.handshakeTimeout))
	hello, err := readFrame(br, maxHandshakeBody)
	if err != nil {
		return err
	}
	p := hello.payload
	if hello.kind != opHello || len(p) < len(protoMagic)+2 || string(p[:len(protoMagic)]) != protoMagic {
		return fmt.Errorf("%w: not a store client hello", errMalformed)
	}
	if v := binary.BigEndian.Uint16(p[len(protoMagic):]); v != protoVersion {
		msg := fmt.Sprintf("protocol version %d not supported; this server speaks version %d", v, protoVersion)
		c.conn.Write(appendFrame(nil, statusBadVersion, 0, []byte(msg)))
		return errors.New("store: " + msg)
	}
	if len(p) != len(protoMagic)+2+nonceSize {
		return fmt.Errorf("%w: hello of %d bytes", errMalformed, len(p))
	}
	clientNonce := hello.payload[len(protoMagic)+2:]
	serverNonce := make([]byte, nonceSize)
	rand.Read(serverNonce)

	resp := binary.BigEndian.AppendUint16(nil, protoVersion)
	resp = append(resp, serverNonce...)
	resp = append(resp, proof(s.token, "server", clientNonce, serverNonce)...)
	if _, err := c.conn.Write(appendFrame(nil, statusOK, 0, resp)); err != nil {
		return err
	}

	auth, err := readFrame(br, maxHandshakeBody)
	if err != nil {
		return err
	}
	if auth.kind != opAuth || len(auth.payload) != proofSize {
		return fmt.Errorf("%w: expected the client's proof", errMalformed)
	}
	if !hmac.Equal(auth.payload, proof(s.token, "client", clientNonce, serverNonce)) {
		c.conn.Write(appendFrame(nil, statusUnauthorized, 0, []byte("wrong job token")))
		return fmt.Errorf("%w: wrong job token", ErrUnauthorized)
	}
	if _, err := c.conn.Write(appendFrame(nil, statusOK, 0, nil)); err != nil {
		return err
	}
	return c.conn.SetDeadline(time.Time{})
}

// handle executes one request. An error means the client broke the protocol
// and the connection must be dropped.
func (s *Server) handle(c *serverConn, f frame) error {
	switch f.kind {
	case opSet:
		key, value, err := decodeSet(f.payload)
		if err != nil {
			return err
		}
		if len(value) > s.maxValue {
			c.replyError(f.id, statusTooLarge, "value of %d bytes exceeds %d", len(value), s.maxValue)
			return nil
		}
		s.mu.Lock()
		s.data[key] = value
		s.wake(key)
		s.mu.Unlock()
		c.reply(f.id, statusOK, nil)
	case opGet:
		key, err := decodeKey(f.payload)
		if err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if v, ok := s.data[key]; ok {
			c.reply(f.id, statusOK, v)
			return nil
		}
		return s.park(c, f.id, opGet, []string{key})
	case opAdd:
		key, delta, err := decodeAdd(f.payload)
		if err != nil {
			return err
		}
		s.add(c, f.id, key, delta)
	case opWait:
		keys, err := decodeWait(f.payload)
		if err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		var missing []string
		seen := make(map[string]bool, len(keys))
		for _, k := range keys {
			if _, ok := s.data[k]; !ok && !seen[k] {
				seen[k] = true
				missing = append(missing, k)
			}
		}
		if len(missing) == 0 {
			c.reply(f.id, statusOK, nil)
			return nil
		}
		return s.park(c, f.id, opWait, missing)
	case opDelete:
		key, err := decodeKey(f.payload)
		if err != nil {
			return err
		}
		s.mu.Lock()
		delete(s.data, key)
		s.mu.Unlock()
		c.reply(f.id, statusOK, nil)
	case opCancel:
		s.mu.Lock()
		if w := c.pending[f.id]; w != nil {
			s.unpark(w)
		}
		s.mu.Unlock()
	default:
		return fmt.Errorf("%w: unknown request type %d", errMalformed, f.kind)
	}
	return nil
}

func (s *Server) add(c *serverConn, id uint64, key string, delta int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var old int64
	if v, ok := s.data[key]; ok {
		var err error
		if old, err = strconv.ParseInt(string(v), 10, 64); err != nil {
			c.replyError(id, statusNotInteger, "key %q does not hold a decimal integer", key)
			return
		}
	}
	sum := old + delta
	if (delta > 0 && sum < old) || (delta < 0 && sum > old) {
		c.replyError(id, statusNotInteger, "adding %d to %d overflows int64", delta, old)
		return
	}
	s.data[key] = strconv.AppendInt(nil, sum, 10)
	s.wake(key)
	c.reply(id, statusOK, binary.BigEndian.AppendUint64(nil, uint64(sum)))
}

// park registers a Get or Wait for the keys in missing, which are distinct
// and absent. s.mu must be held.
func (s *Server) park(c *serverConn, id uint64, op byte, missing []string) error {
	if _, dup := c.pending[id]; dup {
		return fmt.Errorf("%w: request id %d already pending", errMalformed, id)
	}
	if len(c.pending) >= maxPendingPerConn {
		c.replyError(id, statusError, "too many pending calls on one connection (limit %d)", maxPendingPerConn)
		return nil
	}
	w := &waiter{c: c, id: id, op: op, keys: missing, missing: len(missing)}
	for _, k := range missing {
		ws := s.waiters[k]
		if ws == nil {
			ws = make(map[*waiter]struct{})
			s.waiters[k] = ws
		}
		ws[w] = struct{}{}
	}
	c.pending[id] = w
	return nil
}

// unpark forgets w without answering it. s.mu must be held.
func (s *Server) unpark(w *waiter) {
	delete(w.c.pending, w.id)
	for _, k := range w.keys {
		if ws := s.waiters[k]; ws != nil {
			delete(ws, w)
			if len(ws) == 0 {
				delete(s.waiters, k)
			}
		}
	}
}

// wake answers the calls whose last missing key was key, which was just
// set. s.mu must be held.
func (s *Server) wake(key string) {
	ws := s.waiters[key]
	if ws == nil {
		return
	}
	delete(s.waiters, key)
	for w := range ws {
		w.missing--
		if w.missing > 0 {
			continue
		}
		delete(w.c.pending, w.id)
		if w.op == opGet {
			w.c.reply(w.id, statusOK, s.data[key])
		} else {
			w.c.reply(w.id, statusOK, nil)
		}
	}
}

package store

import (
	"bufio"
	"cmp"
	"container/list"
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
	// MaxBytes bounds the memory the stored data may take: the keys and
	// values held, plus the keys of the Get and Wait calls parked until
	// their keys are set. A Set, Add, Get or Wait that would go beyond it
	// fails with ErrTooLarge ("store is full"). Large requests being
	// received count against a second budget of the same size, so the
	// server holds at most about twice MaxBytes; a request that finds that
	// one spent fails with ErrTooLarge ("store is busy"). Zero means
	// DefaultMaxBytes.
	MaxBytes int64
	// HandshakeTimeout bounds how long a new connection may take to
	// authenticate. Zero means 10 seconds.
	HandshakeTimeout time.Duration
	// MaxPending bounds the connections that have not yet proved they
	// know the token, in all (zero means DefaultMaxPending) and from one
	// IP address (MaxPendingPerSource; zero means
	// DefaultMaxPendingPerSource). A new connection beyond either limit
	// makes the server close the oldest such connection (of the same
	// source, for the per-source limit): a client that knows the token
	// proves it within a round trip, while connections that linger are
	// the ones a flood leaves. Connections that proved the token count
	// against MaxConns instead, so a flood of strangers never takes their
	// place.
	MaxPending, MaxPendingPerSource int
	// MaxConns bounds the authenticated connections. Zero means
	// DefaultMaxConns.
	MaxConns int
	// Logger receives refused clients and protocol errors, at most one
	// line per kind of event every few seconds with the count of those
	// left out. Nil means slog.Default().
	Logger *slog.Logger
}

// Default limits of a Server.
const (
	DefaultMaxBytes            = 256 << 20
	DefaultMaxPending          = 1024
	DefaultMaxPendingPerSource = 256
	DefaultMaxConns            = 16384
)

const (
	defaultHandshakeTimeout = 10 * time.Second
	// maxPendingPerConn bounds the Get and Wait calls one connection may
	// have parked on the server.
	maxPendingPerConn = 1 << 16
	// maxQueuedPerConn is how many responses may wait to be written to a
	// connection before the server stops reading its requests.
	maxQueuedPerConn = 256
	// entryOverhead is what the server charges for each key it holds,
	// beyond the key's and value's bytes (map entry, headers).
	entryOverhead = 96
	// connBufSize sizes an authenticated connection's read and write
	// buffers; larger frames bypass them.
	connBufSize = 8 << 10
	// logEvery is the least time between two log lines of one kind of
	// refusal.
	logEvery = 10 * time.Second
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
	maxBytes         int64
	handshakeTimeout time.Duration
	maxPending       int
	maxPendingSource int
	maxConns         int
	log              *slog.Logger

	mu      sync.Mutex // guards data, waiters, held and every serverConn.pending
	data    map[string][]byte
	waiters map[string]map[*waiter]struct{}
	held    int64 // bytes charged against maxBytes
	reading int64 // bytes of large frames being read, also up to maxBytes

	lmu       sync.Mutex // guards listeners, conns, closed and the counts below
	listeners []net.Listener
	conns     map[*serverConn]struct{}
	closed    bool
	done      chan struct{} // closed by Close
	wg        sync.WaitGroup
	pending   list.List             // connections not yet authenticated, oldest first
	bySource  map[string]*list.List // the same, per remote IP address
	authed    int                   // authenticated connections

	// Rate-limited logs: strangers refused, connections turned away by a
	// limit, authenticated clients that broke the protocol.
	logRefused, logBusy, logBroken rateLog
}

// waiter is a Get or Wait parked until its keys are set.
type waiter struct {
	c       *serverConn
	id      uint64
	op      byte     // opGet or opWait
	keys    []string // distinct
	missing int      // keys not yet set
	cost    int64    // charged against maxBytes while parked
}

// NewServer returns a Server configured by cfg. It does not listen yet.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.MaxValueSize < 0 {
		return nil, fmt.Errorf("store: negative MaxValueSize %d", cfg.MaxValueSize)
	}
	if cfg.HandshakeTimeout < 0 {
		return nil, fmt.Errorf("store: negative HandshakeTimeout %v", cfg.HandshakeTimeout)
	}
	if cfg.MaxBytes < 0 || cfg.MaxPending < 0 || cfg.MaxPendingPerSource < 0 || cfg.MaxConns < 0 {
		return nil, fmt.Errorf("store: negative limit in ServerConfig (MaxBytes %d, MaxPending %d, MaxPendingPerSource %d, MaxConns %d)",
			cfg.MaxBytes, cfg.MaxPending, cfg.MaxPendingPerSource, cfg.MaxConns)
	}
	s := &Server{
		token:            cfg.Token,
		maxValue:         cfg.MaxValueSize,
		maxBytes:         cmp.Or(cfg.MaxBytes, DefaultMaxBytes),
		handshakeTimeout: cfg.HandshakeTimeout,
		maxPending:       cmp.Or(cfg.MaxPending, DefaultMaxPending),
		maxPendingSource: cmp.Or(cfg.MaxPendingPerSource, DefaultMaxPendingPerSource),
		maxConns:         cmp.Or(cfg.MaxConns, DefaultMaxConns),
		log:              cfg.Logger,
		data:             make(map[string][]byte),
		waiters:          make(map[string]map[*waiter]struct{}),
		conns:            make(map[*serverConn]struct{}),
		bySource:         make(map[string]*list.List),
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
	for _, l := range []*rateLog{&s.logRefused, &s.logBusy, &s.logBroken} {
		l.log, l.every = s.log, logEvery
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
	for _, l := range []*rateLog{&s.logRefused, &s.logBusy, &s.logBroken} {
		l.flush()
	}
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

// startConn registers conn and serves it in a new goroutine. When too many
// connections are unauthenticated, it closes the oldest. It reports false
// when the server is closed.
func (s *Server) startConn(conn net.Conn) bool {
	c := newServerConn(s, conn)
	s.lmu.Lock()
	if s.closed {
		s.lmu.Unlock()
		return false
	}
	var evict *serverConn
	src := s.bySource[c.source]
	if src == nil {
		src = list.New()
		s.bySource[c.source] = src
	}
	switch {
	case src.Len() >= s.maxPendingSource:
		evict = src.Front().Value.(*serverConn)
	case s.pending.Len() >= s.maxPending:
		evict = s.pending.Front().Value.(*serverConn)
	}
	if evict != nil {
		s.unpend(evict)
	}
	c.inAll = s.pending.PushBack(c)
	c.inSource = src.PushBack(c)
	s.conns[c] = struct{}{}
	s.wg.Go(func() { s.serveConn(c) })
	total, fromSource := s.pending.Len(), src.Len()
	s.lmu.Unlock()
	if evict != nil {
		evict.close()
		s.logBusy.warn("store: too many unauthenticated connections; closed the oldest",
			"closed", evict.remote, "new", c.remote, "from_source", fromSource, "total", total,
			"limits", fmt.Sprintf("%d per source, %d in all", s.maxPendingSource, s.maxPending))
	}
	return true
}

// admit moves c from the unauthenticated connections to the authenticated
// ones, unless those are at their limit or c was closed meanwhile.
func (s *Server) admit(c *serverConn) error {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if c.inAll == nil {
		return errors.New("connection closed to make room for newer ones")
	}
	if s.authed >= s.maxConns {
		return fmt.Errorf("server has %d clients (ServerConfig.MaxConns)", s.authed)
	}
	s.unpend(c)
	c.authed = true
	s.authed++
	return nil
}

// unpend forgets c's place among the unauthenticated connections, if it
// still has one. s.lmu must be held.
func (s *Server) unpend(c *serverConn) {
	if c.inAll == nil {
		return
	}
	s.pending.Remove(c.inAll)
	c.inAll = nil
	if src := s.bySource[c.source]; src != nil {
		src.Remove(c.inSource)
		if src.Len() == 0 {
			delete(s.bySource, c.source)
		}
	}
	c.inSource = nil
}

// serverConn is the server's side of one client connection.
type serverConn struct {
	s      *Server
	conn   net.Conn
	remote string
	source string // remote IP address

	// Guarded by s.lmu: authenticated, or its places among the
	// unauthenticated connections (nil once it has none).
	authed          bool
	inAll, inSource *list.Element

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
		c.source = c.remote
		if ta, ok := a.(*net.TCPAddr); ok {
			c.source = ta.IP.String()
		}
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
	if len(c.queue) >= maxQueuedPerConn && !c.closed && testHookNoRoom != nil {
		testHookNoRoom()
	}
	for len(c.queue) >= maxQueuedPerConn && !c.closed {
		c.cond.Wait()
	}
	return !c.closed
}

// Hooks for tests; nil otherwise. testHookNoRoom runs (with the
// connection's lock held) when a connection's reader stops to wait for its
// writer, because the client reads its responses too slowly;
// testHookParked runs (with s.mu held) when a Get or Wait is parked for
// keys.
var (
	testHookNoRoom func()
	testHookParked func(keys []string)
)

// writeLoop writes queued responses until the connection closes.
func (c *serverConn) writeLoop() {
	bw := bufio.NewWriterSize(c.conn, connBufSize)
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
	// A small buffer until the client has proved the token: a flood of
	// strangers costs little.
	br := bufio.NewReaderSize(c.conn, 2*maxHandshakeBody)
	if err := s.handshake(c, br); err != nil {
		switch {
		case errors.Is(err, ErrUnauthorized):
			s.logRefused.warn("store: refused client", "remote", c.remote, "reason", err)
		case errors.Is(err, errBusy):
			s.logBusy.warn("store: refused client", "remote", c.remote, "reason", err)
		case c.isClosed():
		case errors.Is(err, errMalformed):
			s.logRefused.warn("store: handshake failed", "remote", c.remote, "err", err)
		default:
			s.log.Debug("store: handshake failed", "remote", c.remote, "err", err)
		}
		return
	}
	s.serveRequests(c, bufio.NewReaderSize(br, connBufSize))
}

// serveRequests runs an authenticated connection: it starts the writer and
// handles requests until the connection ends or breaks the protocol.
func (s *Server) serveRequests(c *serverConn, br *bufio.Reader) {
	s.wg.Go(c.writeLoop)
	maxBody := frameSlack + s.maxValue
	// Large frames being read count against a budget of MaxBytes of their
	// own, so that clients sending at once cannot make the server hold
	// more than that beside the data.
	var reserved int64
	reserve := func(n int) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.reading+int64(n) > s.maxBytes {
			return false
		}
		s.reading += int64(n)
		reserved = int64(n)
		return true
	}
	for {
		f, skipped, err := readFrameBudget(br, maxBody, reserve)
		if reserved > 0 {
			// Read: from here the data counts as stored, or is dropped.
			s.mu.Lock()
			s.reading -= reserved
			s.mu.Unlock()
			reserved = 0
		}
		if err == nil && skipped {
			msg := fmt.Sprintf("store is busy: large requests being received already take its limit of %d bytes (ServerConfig.MaxBytes); try again", s.maxBytes)
			if f.kind == opCancel {
				err = fmt.Errorf("%w: oversized cancel", errMalformed)
			} else {
				c.reply(f.id, statusTooLarge, []byte(msg))
				if !c.waitRoom() {
					return
				}
				continue
			}
		}
		if err != nil {
			switch {
			case err == io.EOF || c.isClosed():
			case errors.Is(err, errMalformed):
				s.logBroken.warn("store: dropping connection", "remote", c.remote, "err", err)
			default:
				s.log.Debug("store: connection failed", "remote", c.remote, "err", err)
			}
			return
		}
		if err := s.handle(c, f); err != nil {
			s.logBroken.warn("store: dropping connection", "remote", c.remote, "err", err)
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
	if _, ok := s.conns[c]; ok {
		delete(s.conns, c)
		if c.authed {
			s.authed--
		}
		s.unpend(c)
	}
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
	if _, err := c.conn.Write(appendFrame(nil, statusOK, 0, resp)); err != nil {
		return err
	}

	// The client proves first, so a stranger learns nothing to test token
	// guesses against.
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
	if err := s.admit(c); err != nil {
		c.conn.Write(appendFrame(nil, statusError, 0, []byte(err.Error())))
		return fmt.Errorf("%w: %w", errBusy, err)
	}
	if _, err := c.conn.Write(appendFrame(nil, statusOK, 0, proof(s.token, "server", clientNonce, serverNonce))); err != nil {
		return err
	}
	return c.conn.SetDeadline(time.Time{})
}

// errBusy marks a client turned away by a connection limit.
var errBusy = errors.New("store: server busy")

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
		if err := s.charge(entryCost(key, value) - s.entryCost(key)); err != nil {
			s.mu.Unlock()
			c.replyError(f.id, statusTooLarge, "set %q: %v", key, err)
			return nil
		}
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
		s.held -= s.entryCost(key)
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
	v := strconv.AppendInt(nil, sum, 10)
	if err := s.charge(entryCost(key, v) - s.entryCost(key)); err != nil {
		c.replyError(id, statusTooLarge, "add %q: %v", key, err)
		return
	}
	s.data[key] = v
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
	w := &waiter{c: c, id: id, op: op, keys: missing, missing: len(missing), cost: entryOverhead}
	for _, k := range missing {
		w.cost += int64(len(k)) + entryOverhead
	}
	if err := s.charge(w.cost); err != nil {
		c.replyError(id, statusTooLarge, "wait for %d keys: %v", len(missing), err)
		return nil
	}
	for _, k := range missing {
		ws := s.waiters[k]
		if ws == nil {
			ws = make(map[*waiter]struct{})
			s.waiters[k] = ws
		}
		ws[w] = struct{}{}
	}
	c.pending[id] = w
	if testHookParked != nil {
		testHookParked(missing)
	}
	return nil
}

// unpark forgets w without answering it. s.mu must be held.
func (s *Server) unpark(w *waiter) {
	s.held -= w.cost
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
		s.held -= w.cost
		if w.op == opGet {
			w.c.reply(w.id, statusOK, s.data[key])
		} else {
			w.c.reply(w.id, statusOK, nil)
		}
	}
}

// entryCost is what holding key with value costs against MaxBytes.
func entryCost(key string, value []byte) int64 {
	return int64(len(key)) + int64(len(value)) + entryOverhead
}

// entryCost is what the current entry of key costs, 0 when there is none.
// s.mu must be held.
func (s *Server) entryCost(key string) int64 {
	v, ok := s.data[key]
	if !ok {
		return 0
	}
	return entryCost(key, v)
}

// charge adds n bytes to what the server holds, or fails, changing
// nothing, when that would exceed MaxBytes. s.mu must be held.
func (s *Server) charge(n int64) error {
	if n > 0 && s.held+n > s.maxBytes {
		return fmt.Errorf("store is full: it holds %d bytes and %d more would exceed its limit of %d (ServerConfig.MaxBytes)",
			s.held, n, s.maxBytes)
	}
	s.held += n
	return nil
}

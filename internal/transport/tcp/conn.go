package tcp

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// stripeMin is the smallest message striped over a pair's connections;
// smaller ones travel whole on connection 0 (see peer.plan for the cut).
const stripeMin = 64 << 10

// errProtocol marks a frame that breaks the protocol: garbage, a stripe that
// does not fit its message, an impossible length.
var errProtocol = errors.New("protocol violation")

// conn is one TCP connection of a peer pair. Frames on it are written under
// wmu and read by one reader at a time under rmu.
type conn struct {
	nc   net.Conn
	idx  int   // index in the handshake: path * NSocks + slot
	pos  int   // index among the pair's connections in use
	path *path // the network path it travels
	crc  bool  // send a CRC32C with every data frame

	wmu     sync.Mutex
	whdr    [wire.FrameHeaderSize]byte
	warr    [2][]byte
	wb      net.Buffers
	wbroken bool   // a frame was left half written
	wclosed bool   // the abort frame went out; nothing may follow
	wrote   uint64 // bytes written on the stream
	leads   bool   // a lead frame went out here: the send lead moved here (lead.go)
	kbase   uint64 // the kernel's count of bytes written before the stream (lead.go)
	// Set by the send lead's writer around a write (lead.go): the replay
	// copy to add the frame to, or where to keep its header.
	log    *leadLog
	seghdr *[wire.FrameHeaderSize]byte

	tinfo tcpInfoReader // TCP_INFO reads (tcpinfo_linux.go)
	front sockPeek      // peeks at the socket's front (peekFront, lead_linux.go)

	rmu      sync.Mutex
	rhdr     [wire.FrameHeaderSize]byte
	rhn      int              // bytes of rhdr read by an interrupted watchHeader
	peek     wire.FrameHeader // a header put back by unread
	peeked   bool
	draining bool // the rank aborted; drain owns the reading side

	// Polled reads (see readPolled); raw is nil when they are off.
	raw     syscall.RawConn
	pollFor time.Duration
	yield   bool
	sending *atomic.Int32 // no polling while the transport sends elsewhere
	rbuf    []byte        // readPolled's destination, for pollFn
	rn      int           // bytes of rbuf filled
	rerr    error         // end of stream or read error seen by pollFn
	pollFn  func(fd uintptr) bool
	// ahead[aoff:aend] holds bytes a polled read took past its
	// destination (see poll): small frames that came together are read
	// in one system call. Every read of the connection takes them first.
	ahead      []byte
	aoff, aend int

	// The lead stream's move onto this connection (lead.go): before its
	// own bytes, a reader takes prevLeft more bytes of the old lead
	// prev, then discards skip bytes of the replay (read twice), then
	// reads the replay's other replayLeft bytes and the stream after.
	rjob       atomic.Bool // a receive worker has a stripe to read here
	rread      uint64      // bytes of the stream consumed by readers
	prev       *conn
	prevLeft   uint64
	skip       uint64
	replayLeft uint64
	// Where c's stream stands in the lead stream (offsets counted
	// across moves, lead.go) once it leads: its byte lcs is the lead
	// stream's lres. A move joined from a lead other than the one it
	// left (whose lead frame never came) brings the bytes written on
	// that lead, mid, from the lead stream's midAt.
	lres, lcs uint64
	mid       *conn
	midAt     uint64
	// leadLeft marks a connection the peer's lead stream left while
	// this rank read another lead: no lead frame there is joined.
	leadLeft atomic.Bool
}

// aheadSize is how much a polled read of a frame header may take from the
// socket at once (see poll).
const aheadSize = 4 << 10

// Read reads the connection's stream: first the bytes a polled read took
// ahead, then the socket. The caller holds rmu.
func (c *conn) Read(b []byte) (int, error) {
	if c.prev != nil {
		return c.readJoined(b)
	}
	if c.aoff < c.aend {
		k := copy(b, c.ahead[c.aoff:c.aend])
		c.aoff += k
		c.rread += uint64(k)
		return k, nil
	}
	if c.raw != nil && len(b) > 0 && c.sending.Load() == 0 {
		// The rest of a frame that came in pieces: polled like its
		// header, rather than waiting in the poller for each piece.
		return c.readPolled(b)
	}
	n, err := c.nc.Read(b)
	c.rread += uint64(n)
	return n, err
}

// readJoined reads the lead stream moved onto c: the rest of the old
// stream, then the replay less what was read twice, then c's own stream.
func (c *conn) readJoined(b []byte) (int, error) {
	if c.prevLeft > 0 {
		n, err := c.prev.Read(b[:min(uint64(len(b)), c.prevLeft)])
		c.prevLeft -= uint64(n)
		if err != nil && c.prevLeft > 0 {
			return n, fmt.Errorf("the old lead stream failed before its last %d bytes: %w", c.prevLeft, err)
		}
		return n, nil
	}
	for c.skip > 0 {
		n, err := c.readOwn(b[:min(uint64(len(b)), c.skip)])
		c.skip -= uint64(n)
		if err != nil {
			return 0, err
		}
	}
	if c.replayLeft == 0 {
		c.prev = nil // joined: plain reads from now on
	}
	return c.readOwn(b)
}

// readOwn reads c's own stream, counting down the replay.
func (c *conn) readOwn(b []byte) (int, error) {
	var n int
	var err error
	if c.aoff < c.aend {
		n = copy(b, c.ahead[c.aoff:c.aend])
		c.aoff += n
	} else {
		n, err = c.nc.Read(b)
	}
	c.rread += uint64(n)
	c.replayLeft -= min(c.replayLeft, uint64(n))
	return n, err
}

// inReplay reports whether the next byte read comes from an old lead
// stream or its replay, that is was written while another connection
// led.
func (c *conn) inReplay() bool {
	return c.prevLeft > 0 || c.skip > 0 || c.replayLeft > 0
}

// replayAhead reports whether the next bytes read from c come from the old
// lead stream or the replay of a move (lead.go), not from c's own stream:
// a header read then was written while an older lead led. (Bytes still to
// skip are not read: they were had already.)
func (c *conn) replayAhead() bool {
	return c.prevLeft > 0 || c.replayLeft > 0
}

// leadRead returns how far into the lead stream (counted across moves,
// lead.go) c's reader is: what it consumed, plus the replay bytes it will
// skip, less the old stream's bytes it has yet to take. The caller holds
// rmu.
func (c *conn) leadRead() uint64 {
	return c.lres - c.prevLeft + (c.rread - c.lcs) + c.skip
}

// leadHeld returns how far into the lead stream the bytes c's reader can
// read without more coming reach, with q the bytes its socket holds. The
// caller holds rmu.
func (c *conn) leadHeld(q uint64) uint64 {
	return max(c.lres+(c.rread-c.lcs)+q+uint64(c.aend-c.aoff), c.leadRead())
}

func newConn(nc net.Conn, idx int, crc bool, deadAfter time.Duration) *conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		if deadAfter > 0 {
			// Idle: probes from half the bound, five of them, then
			// the connection fails. Busy: unacknowledged data fails
			// it after the bound (TCP_USER_TIMEOUT, where there is
			// one).
			tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true,
				Idle: max(deadAfter/2, time.Second), Interval: max(deadAfter/10, time.Second), Count: 5})
			setUserTimeout(tc, deadAfter)
		}
	}
	c := &conn{nc: nc, idx: idx, crc: crc}
	c.tinfo.init(nc)
	c.front.init(nc)
	return c
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkCRC verifies a payload against its frame's checksum, if it has one.
func checkCRC(peer int, h *wire.FrameHeader, payload []byte) error {
	if h.Flags&wire.FlagCRC32C == 0 {
		return nil
	}
	if got := crc32.Checksum(payload, castagnoli); got != h.Checksum {
		return fmt.Errorf("a %d-byte frame from rank %d failed its CRC32C check (%#08x, sent %#08x): the data was corrupted in transit: %w",
			len(payload), peer, got, h.Checksum, errProtocol)
	}
	return nil
}

// writeFrame writes one data frame carrying part, header and payload in one
// vectored write, without copying part. It reports how many bytes went out.
// paths is wire.FrameHeader.Paths.
func (c *conn) writeFrame(fp *wire.Fingerprint, total uint64, part []byte, paths uint16) (int64, error) {
	return c.write(&wire.FrameHeader{Type: wire.FrameData, Paths: paths, Len: uint64(len(part)), Total: total, Fingerprint: *fp}, part)
}

// writeStripe writes a stripe frame carrying part, bytes [off,
// off+len(part)) of a message, as writeFrame does; repairs, not zero, names
// the paths whose stripes it replaces.
func (c *conn) writeStripe(fp *wire.Fingerprint, off uint64, part []byte, repairs uint16) (int64, error) {
	return c.write(&wire.FrameHeader{Type: wire.FrameStripe, Paths: repairs, Len: uint64(len(part)), Offset: off, Fingerprint: *fp}, part)
}

func (c *conn) write(h *wire.FrameHeader, part []byte) (int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wbroken || c.wclosed {
		return 0, net.ErrClosed
	}
	if c.crc && h.Type != wire.FrameRejoin {
		h.Flags, h.Checksum = wire.FlagCRC32C, crc32.Checksum(part, castagnoli)
	}
	h.MarshalTo(c.whdr[:])
	if c.log != nil {
		c.log.add(c.whdr[:])
		c.log.add(part)
	}
	if c.seghdr != nil {
		*c.seghdr = c.whdr
	}
	c.warr[0], c.warr[1] = c.whdr[:], part
	c.wb = c.warr[:]
	if len(part) == 0 {
		c.wb = c.warr[:1]
	}
	n, err := c.wb.WriteTo(c.nc)
	c.wrote += uint64(n)
	c.warr[1], c.wb = nil, nil // drop the caller's buffer
	if err != nil && n > 0 {
		c.wbroken = true
	}
	return n, err
}

// writeHead writes the header of a data frame whose payload is part, but
// not the payload: writeRaw follows with it.
func (c *conn) writeHead(h *wire.FrameHeader, part []byte) (int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wbroken || c.wclosed {
		return 0, net.ErrClosed
	}
	if c.crc {
		h.Flags, h.Checksum = wire.FlagCRC32C, crc32.Checksum(part, castagnoli)
	}
	h.MarshalTo(c.whdr[:])
	if c.seghdr != nil {
		*c.seghdr = c.whdr
	}
	n, err := c.nc.Write(c.whdr[:])
	c.wrote += uint64(n)
	if err != nil && n > 0 {
		c.wbroken = true
	}
	return int64(n), err
}

// writeRaw writes the payload whose header writeHead wrote.
func (c *conn) writeRaw(part []byte) (int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wbroken || c.wclosed {
		return 0, net.ErrClosed
	}
	n, err := c.nc.Write(part)
	c.wrote += uint64(n)
	if err != nil {
		c.wbroken = true
	}
	return int64(n), err
}

// retireWrite marks the connection's sending side out of use: the frame in
// progress, if any, is interrupted and nothing more is written.
func (c *conn) retireWrite() {
	c.nc.SetWriteDeadline(aLongTimeAgo)
	c.wmu.Lock()
	c.wbroken = true
	c.wmu.Unlock()
}

// writeAbort writes an abort frame with a short deadline unless a frame was
// left half written, then shuts the writing side so nothing can follow it.
// Call it once the connection's gate is dead, so no Send starts writing.
func (c *conn) writeAbort(frame []byte, timeout time.Duration) {
	c.nc.SetWriteDeadline(aLongTimeAgo) // interrupt a Send in progress
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wclosed {
		return
	}
	if !c.wbroken {
		c.nc.SetWriteDeadline(time.Now().Add(timeout))
		c.nc.Write(frame)
	}
	c.wclosed = true
	if tc, ok := c.nc.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
}

// drain reads and discards whatever the peer still sends, so a peer blocked
// sending to an aborted rank gets unblocked and moves on to a receive that
// tells it about the abort. It returns when the connection fails or closes.
func (c *conn) drain() {
	c.nc.SetReadDeadline(aLongTimeAgo) // interrupt a Recv in progress
	c.rmu.Lock()
	c.draining = true // readers that come later back off
	c.rmu.Unlock()
	c.nc.SetReadDeadline(time.Time{})
	var buf [16 << 10]byte
	for {
		if _, err := c.nc.Read(buf[:]); err != nil {
			return
		}
	}
}

// readPolled fills b like io.ReadFull, but waits for the data by polling
// the socket with non-blocking reads for up to pollFor before it blocks in
// the network poller. The caller holds rmu. Deadlines apply as to Read
// (polling is bounded, so an interrupting deadline is seen within pollFor).
func (c *conn) readPolled(b []byte) (int, error) {
	if c.raw == nil || len(b) == 0 || c.sending.Load() > 0 || c.aoff < c.aend || c.prev != nil {
		return io.ReadFull(c, b)
	}
	c.rbuf, c.rn, c.rerr = b, 0, nil
	err := c.raw.Read(c.pollFn)
	n := c.rn
	c.rread += uint64(n)
	if c.rerr != nil {
		err = c.rerr
	}
	c.rbuf, c.rerr = nil, nil
	if err != nil && err != io.EOF {
		// Wrapped as net wraps a read's error, and like net the end of
		// the stream bare: callers compare with io.EOF.
		return n, &net.OpError{Op: "read", Net: "tcp", Addr: c.nc.RemoteAddr(), Err: err}
	}
	if err != nil {
		return n, err
	}
	return n, nil
}

// readHeader reads and decodes the next frame header; the caller holds rmu.
// n counts the header bytes read, so the caller can tell a clean
// interruption (none) from a broken stream. A header whose read was
// interrupted part way (see watchHeader) is completed, and one put back by
// unread is returned first.
// poll asks for a polled read (readPolled) of the header.
func (c *conn) readHeader(peer int, poll bool) (h wire.FrameHeader, n int, err error) {
	if c.draining {
		return h, 0, net.ErrClosed
	}
	if c.peeked {
		c.peeked = false
		return c.peek, wire.FrameHeaderSize, nil
	}
	for {
		h, n, err = c.readOneHeader(peer, poll)
		if err != nil || h.Type != wire.FramePing {
			return h, n, err
		}
	}
}

// readOneHeader is readHeader without skipping pings.
func (c *conn) readOneHeader(peer int, poll bool) (h wire.FrameHeader, n int, err error) {
	if poll {
		n, err = c.readPolled(c.rhdr[c.rhn:])
	} else {
		n, err = io.ReadFull(c, c.rhdr[c.rhn:])
	}
	if err != nil {
		// Kept, so that a read woken part way (see lead.go) goes on.
		c.rhn += n
		return h, n, err
	}
	c.rhn = 0
	if err := h.Unmarshal(c.rhdr[:]); err != nil {
		return h, n, fmt.Errorf("rank %d sent a bad frame on connection %d: %v: %w", peer, c.idx, err, errProtocol)
	}
	return h, n, nil
}

// watchHeader reads the next frame header like readHeader, but keeps the
// bytes of a header whose read is interrupted, so that a later read
// completes it: the stream stays in step.
func (c *conn) watchHeader(peer int) (h wire.FrameHeader, err error) {
	if c.draining {
		return h, net.ErrClosed
	}
	if c.peeked {
		c.peeked = false
		return c.peek, nil
	}
	for {
		n, err := io.ReadFull(c, c.rhdr[c.rhn:])
		if err != nil {
			c.rhn += n
			return h, err
		}
		c.rhn = 0
		if err := h.Unmarshal(c.rhdr[:]); err != nil {
			return h, fmt.Errorf("rank %d sent a bad frame on connection %d: %v: %w", peer, c.idx, err, errProtocol)
		}
		if h.Type != wire.FramePing {
			return h, nil
		}
	}
}

// quiet reports whether a read of the connection must wait for the
// socket: nothing read ahead, put back or joined from an earlier lead.
// The caller holds rmu.
func (c *conn) quiet() bool {
	return !c.peeked && c.prev == nil && c.aoff >= c.aend && !c.draining
}

// unread puts back a header read by watchHeader, for the next readHeader.
func (c *conn) unread(h *wire.FrameHeader) {
	c.peek, c.peeked = *h, true
}

// abortError reads the reason of an abort frame whose header h was just
// read and returns the error that reports it.
func (c *conn) abortError(peer int, h *wire.FrameHeader) error {
	reason := make([]byte, h.Len) // bounded by wire.MaxAbortReason
	if _, err := io.ReadFull(c, reason); err != nil {
		return &errs.PeerError{Peer: peer, Kind: errs.ErrAborted}
	}
	text := wire.AbortReason(reason)
	if h.Flags&wire.FlagLost != 0 && int(h.Total) != peer {
		// The peer aborted because it lost another rank: that rank is
		// the one to report.
		return &errs.PeerError{Peer: int(h.Total), Kind: errs.ErrPeerLost,
			Cause: fmt.Errorf("lost, as rank %d reported when it aborted: %s", peer, text)}
	}
	if h.Flags&wire.FlagLost != 0 {
		return &errs.PeerError{Peer: peer, Kind: errs.ErrPeerLost, Cause: errors.New(text)}
	}
	if text == "" {
		return &errs.PeerError{Peer: peer, Kind: errs.ErrAborted}
	}
	return &errs.PeerError{Peer: peer, Kind: errs.ErrAborted, Cause: errors.New(text)}
}

// readStripeHeader reads the header of a stripe, other than the first, of
// a message whose first stripe announced total bytes under fingerprint fp.
// The caller holds rmu.
func (c *conn) readStripeHeader(peer int, fp *wire.Fingerprint, total uint64) (wire.FrameHeader, int, error) {
	h, n, err := c.readHeader(peer, false)
	switch {
	case err != nil:
		return h, n, err
	case h.Type == wire.FrameAbort:
		return h, n, c.abortError(peer, &h)
	case h.Type != wire.FrameStripe || h.Fingerprint != *fp || h.Paths != 0 || h.Offset+h.Len > total:
		return h, n, fmt.Errorf("rank %d sent a %s frame on connection %d as %d bytes at %d of %v (paths %#x), but the first stripe announced %d bytes of %v: %w",
			peer, h.Type, c.idx, h.Len, h.Offset, h.Fingerprint, h.Paths, total, *fp, errProtocol)
	}
	return h, n, nil
}

// A worker moves the stripes of striped messages on one connection other
// than connection 0, so all of a pair's connections move data at once.
// Jobs are handed over unbuffered; a worker that took a job answers once on
// done, the channel its peer's workers of that direction share: a send job
// with the bytes written and the time it took, a receive job with where
// its stripe went (each stripe frame says) and the bytes read.
type worker struct {
	pos  int // the position of the connections it serves
	pr   *peer
	jobs chan job
	done chan<- result
}

type job struct {
	c     *conn // the connection at the worker's position that its direction uses (see redial.go)
	recv  bool  // receive a stripe (else send one)
	watch bool  // receive: the receiver watches connection 0 meanwhile (see Transport.Recv)
	fp    wire.Fingerprint
	total uint64
	off   uint64 // send: where the stripe starts in its message
	buf   []byte // the stripe to send, or the whole message's buffer
}

type result struct {
	pos int           // the worker's connection
	n   int64         // bytes moved, headers included
	off uint64        // where the stripe received starts
	len uint64        // payload bytes
	d   time.Duration // how long a send took
	err error
}

func newWorker(pr *peer, pos int, done chan<- result) *worker {
	return &worker{pos: pos, pr: pr, jobs: make(chan job), done: done}
}

// run serves jobs until stop is closed.
func (w *worker) run(peer int, stop <-chan struct{}) {
	for {
		select {
		case j := <-w.jobs:
			if j.recv {
				r := w.recvStripe(peer, &j)
				j.c.rjob.Store(false)
				if r.err == errLeadMoved {
					// Wake the receive to join the lead.
					w.pr.recv.pokeLead()
				}
				if j.watch && w.pr.rwait.Add(-1) == 0 {
					// The last stripe is in: wake the receiver from
					// its watch on connection 0 (before the answer,
					// so the wake-up cannot land in its next call;
					// see peer.watchRepairs).
					w.pr.recv.wakeWatch(w.pr.rinwait.Load())
				}
				w.done <- r
				continue
			}
			start := time.Now()
			r := result{pos: w.pos, off: j.off, len: uint64(len(j.buf))}
			if h := w.pr.t.testSend; h != nil {
				r.n, r.err = h(j.c, j.fp, j.off, j.buf)
			} else {
				r.n, r.err = j.c.writeStripe(&j.fp, j.off, j.buf, 0)
			}
			r.d = time.Since(start)
			w.done <- r
		case <-stop:
			return
		}
	}
}

func (w *worker) recvStripe(peer int, j *job) result {
	c := j.c
	c.rmu.Lock()
	defer c.rmu.Unlock()
	h, n, err := c.readStripeHeader(peer, &j.fp, j.total)
	r := result{pos: c.pos, n: int64(n), off: h.Offset, err: err}
	if err != nil {
		if h.Type == wire.FrameLead && errors.Is(err, errProtocol) {
			// The lead moved onto this connection: the stripe comes
			// on the lead stream after the first (lead.go). The
			// receive joins the lead here.
			c.unread(&h)
			r.n, r.err = 0, errLeadMoved
			w.pr.rmove.Store(true)
		}
		return r
	}
	buf := j.buf[h.Offset : h.Offset+h.Len]
	m, err := io.ReadFull(c, buf)
	if err == nil {
		err = checkCRC(peer, &h, buf)
	}
	r.n += int64(m)
	r.len = uint64(m)
	r.err = err
	return r
}

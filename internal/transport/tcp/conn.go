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
// smaller ones travel whole on connection 0.
const stripeMin = 64 << 10

// stripes returns over how many of a pair's n connections a message of
// total bytes travels. Both ends derive it from the length alone.
func stripes(total uint64, n int) int {
	if n <= 1 || total < stripeMin {
		return 1
	}
	return n
}

// stripe returns the offset and length of stripe i of a total-byte message
// cut into k stripes.
func stripe(total uint64, k, i int) (off, n uint64) {
	per := (total + uint64(k) - 1) / uint64(k)
	off = min(uint64(i)*per, total)
	return off, min(per, total-off)
}

// errProtocol marks a frame that breaks the protocol: garbage, a stripe that
// does not fit its message, an impossible length.
var errProtocol = errors.New("protocol violation")

// conn is one TCP connection of a peer pair. Frames on it are written under
// wmu and read by one reader at a time under rmu.
type conn struct {
	nc  net.Conn
	idx int
	crc bool // send a CRC32C with every data frame

	wmu     sync.Mutex
	whdr    [wire.FrameHeaderSize]byte
	warr    [2][]byte
	wb      net.Buffers
	wbroken bool // a frame was left half written
	wclosed bool // the abort frame went out; nothing may follow

	rmu      sync.Mutex
	rhdr     [wire.FrameHeaderSize]byte
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
}

func newConn(nc net.Conn, idx int, crc bool) *conn {
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	return &conn{nc: nc, idx: idx, crc: crc}
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
func (c *conn) writeFrame(fp *wire.Fingerprint, total uint64, part []byte) (int64, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wbroken || c.wclosed {
		return 0, net.ErrClosed
	}
	h := wire.FrameHeader{Type: wire.FrameData, Len: uint64(len(part)), Total: total, Fingerprint: *fp}
	if c.crc {
		h.Flags, h.Checksum = wire.FlagCRC32C, crc32.Checksum(part, castagnoli)
	}
	h.MarshalTo(c.whdr[:])
	c.warr[0], c.warr[1] = c.whdr[:], part
	c.wb = c.warr[:]
	if len(part) == 0 {
		c.wb = c.warr[:1]
	}
	n, err := c.wb.WriteTo(c.nc)
	c.warr[1], c.wb = nil, nil // drop the caller's buffer
	if err != nil && n > 0 {
		c.wbroken = true
	}
	return n, err
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
	if c.raw == nil || len(b) == 0 || c.sending.Load() > 0 {
		return io.ReadFull(c.nc, b)
	}
	c.rbuf, c.rn, c.rerr = b, 0, nil
	err := c.raw.Read(c.pollFn)
	n := c.rn
	if c.rerr != nil {
		err = c.rerr
	}
	c.rbuf, c.rerr = nil, nil
	if err != nil {
		return n, &net.OpError{Op: "read", Net: "tcp", Addr: c.nc.RemoteAddr(), Err: err}
	}
	return n, nil
}

// readHeader reads and decodes the next frame header; the caller holds rmu.
// n counts the header bytes read, so the caller can tell a clean
// interruption (none) from a broken stream.
// poll asks for a polled read (readPolled) of the header.
func (c *conn) readHeader(peer int, poll bool) (h wire.FrameHeader, n int, err error) {
	if c.draining {
		return h, 0, net.ErrClosed
	}
	if poll {
		n, err = c.readPolled(c.rhdr[:])
	} else {
		n, err = io.ReadFull(c.nc, c.rhdr[:])
	}
	if err != nil {
		return h, n, err
	}
	if err := h.Unmarshal(c.rhdr[:]); err != nil {
		return h, n, fmt.Errorf("rank %d sent a bad frame on connection %d: %v: %w", peer, c.idx, err, errProtocol)
	}
	return h, n, nil
}

// abortError reads the reason of an abort frame whose header h was just
// read and returns the error that reports it.
func (c *conn) abortError(peer int, h *wire.FrameHeader) error {
	reason := make([]byte, h.Len) // bounded by wire.MaxAbortReason
	if _, err := io.ReadFull(c.nc, reason); err != nil {
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

// readStripe reads stripe c.idx of a message whose first stripe announced
// total bytes under fingerprint fp: a header that must agree with that,
// then the payload into buf.
func (c *conn) readStripe(peer int, fp *wire.Fingerprint, total uint64, buf []byte) (int64, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	h, n, err := c.readHeader(peer, false)
	if err != nil {
		return int64(n), err
	}
	switch {
	case h.Type == wire.FrameAbort:
		return int64(n), c.abortError(peer, &h)
	case h.Total != total || h.Fingerprint != *fp || h.Len != uint64(len(buf)):
		return int64(n), fmt.Errorf("rank %d sent stripe %d as %d of %d bytes of %v, but stripe 0 announced %d bytes of %v: %w",
			peer, c.idx, h.Len, h.Total, h.Fingerprint, total, *fp, errProtocol)
	}
	m, err := io.ReadFull(c.nc, buf)
	if err == nil {
		err = checkCRC(peer, &h, buf)
	}
	return int64(n + m), err
}

// A worker moves the stripes of striped messages on one connection other
// than connection 0, so all of a pair's connections move data at once.
// Jobs are handed over unbuffered; a worker that took a job always answers.
type worker struct {
	c    *conn
	jobs chan job
	done chan result
}

type job struct {
	recv  bool // receive a stripe (else send one)
	fp    wire.Fingerprint
	total uint64
	buf   []byte
}

type result struct {
	n   int64
	err error
}

func newWorker(c *conn) *worker {
	return &worker{c: c, jobs: make(chan job), done: make(chan result, 1)}
}

// run serves jobs until stop is closed.
func (w *worker) run(peer int, stop <-chan struct{}) {
	for {
		select {
		case j := <-w.jobs:
			var r result
			if j.recv {
				r.n, r.err = w.c.readStripe(peer, &j.fp, j.total, j.buf)
			} else {
				r.n, r.err = w.c.writeFrame(&j.fp, j.total, j.buf)
			}
			w.done <- r
		case <-stop:
			return
		}
	}
}

//go:build linux

package tcp

import (
	"net"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// sockPeek copies into buf, without taking them and without waiting, the
// received bytes at the front of a connection's socket, allocating
// nothing (the lead watch looks at connections several times per
// StallAfter for as long as a pair lives): the RawConn and the function
// Control runs are made once, when the connection is set up. Its user
// holds the connection's rmu.
type sockPeek struct {
	raw syscall.RawConn
	fn  func(fd uintptr) // p.read, nil when the connection is not a socket
	buf [8 * wire.FrameHeaderSize]byte
	n   int

	// queued's: qfn is p.inq, q the last count (-1: unknown). Callers
	// need not hold rmu, so q is atomic; two at once may each see the
	// other's count, both of the socket as it is.
	qfn func(fd uintptr)
	q   atomic.Int64
	// drainPings': dfn is p.drain, dbuf its header, took its count.
	// The caller holds rmu.
	dfn  func(fd uintptr)
	dbuf [wire.FrameHeaderSize]byte
	took int
}

// init readies p for nc.
func (p *sockPeek) init(nc net.Conn) {
	if raw, ok := rawConn(nc); ok {
		p.raw, p.fn, p.qfn, p.dfn = raw, p.read, p.inq, p.drain
	}
}

// read is the function p's RawConn runs: recv(MSG_PEEK|MSG_DONTWAIT) into
// p.buf.
func (p *sockPeek) read(fd uintptr) {
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.buf[0])), uintptr(len(p.buf)),
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	p.n = 0
	if errno == 0 {
		p.n = int(n)
	}
}

// bytes peeks and returns the bytes at the front of the socket (at most
// len(p.buf), valid until the next peek).
func (p *sockPeek) bytes() []byte {
	if p.fn == nil || p.raw.Control(p.fn) != nil {
		return nil
	}
	return p.buf[:p.n]
}

// inq is the function queued has its RawConn run: ioctl(SIOCINQ).
func (p *sockPeek) inq(fd uintptr) {
	n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	if err != nil {
		n = -1
	}
	p.q.Store(int64(n))
}

// queued returns how many received bytes wait in the socket, allocating
// nothing (the idle pinger and the lead watch ask on every tick).
func (p *sockPeek) queued() (int, bool) {
	if p.qfn == nil || p.raw.Control(p.qfn) != nil {
		return 0, false
	}
	if q := p.q.Load(); q >= 0 {
		return int(q), true
	}
	return 0, false
}

// drain is the function drainPings has its RawConn run: it takes whole
// ping frames off the front of the socket, without waiting, stopping at
// anything else.
func (p *sockPeek) drain(fd uintptr) {
	b := p.dbuf[:]
	for range 1 << 12 {
		if recvNoAddr(fd, b, unix.MSG_PEEK|unix.MSG_DONTWAIT) < len(b) {
			return
		}
		var h wire.FrameHeader
		if h.Unmarshal(b) != nil || h.Type != wire.FramePing {
			return
		}
		n := recvNoAddr(fd, b, unix.MSG_DONTWAIT)
		p.took += max(n, 0)
		if n < len(b) {
			return
		}
	}
}

// recvNoAddr is recv(2) into b, -1 on an error: unix.Recvfrom's address,
// which a connected socket does not fill, would be allocated.
func recvNoAddr(fd uintptr, b []byte, flags int) int {
	n, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(flags), 0, 0)
	if errno != 0 {
		return -1
	}
	return int(n)
}

// drainPings discards, without waiting, the whole ping frames at the head
// of the socket's receive buffer and returns how many bytes it took off
// the stream, allocating nothing. The caller holds the connection's rmu,
// at a frame boundary, and counts them as read (conn.rread).
func (p *sockPeek) drainPings() int {
	p.took = 0
	if p.dfn == nil || p.raw.Control(p.dfn) != nil {
		return 0
	}
	return p.took
}

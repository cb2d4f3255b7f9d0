package tcp

import (
	"math"
	"net"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpInfoReader reads a connection's TCP_INFO without allocating: the
// RawConn, the function Control runs and the struct the kernel fills are
// made once, when the connection is set up. Senders, the pinger and path
// sampling may poll one connection at once, so a read and the use of its
// result happen under mu.
type tcpInfoReader struct {
	mu   sync.Mutex
	raw  syscall.RawConn
	fn   func(fd uintptr) // r.read, nil when TCP_INFO is not read
	info unix.TCPInfo
	size uint32
	err  syscall.Errno
}

// init readies r for nc; a connection that is not a socket is not read.
func (r *tcpInfoReader) init(nc net.Conn) {
	raw, ok := rawConn(nc)
	if !ok {
		return
	}
	r.raw = raw
	r.fn = r.read
}

// read is the function r's RawConn runs: getsockopt(TCP_INFO) into r.info.
func (r *tcpInfoReader) read(fd uintptr) {
	r.size = uint32(unsafe.Sizeof(r.info))
	_, _, r.err = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.IPPROTO_TCP, unix.TCP_INFO,
		uintptr(unsafe.Pointer(&r.info)), uintptr(unsafe.Pointer(&r.size)), 0)
}

// get reads the connection's TCP_INFO into r.info, reporting whether it
// could. r.mu must be held.
func (r *tcpInfoReader) get() bool {
	if r.fn == nil {
		return false
	}
	// An older kernel fills less than the whole struct: the rest reads 0.
	r.info = unix.TCPInfo{}
	if r.raw.Control(r.fn) != nil || r.err != 0 {
		return false
	}
	return true
}

// tcpInfo returns the kernel's smoothed round-trip time and count of
// retransmitted segments for a TCP connection.
func tcpInfo(c *conn) (rtt time.Duration, retrans uint32, ok bool) {
	r := &c.tinfo
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.get() {
		return 0, 0, false
	}
	return time.Duration(r.info.Rtt) * time.Microsecond, r.info.Total_retrans, true
}

// tcpProgress returns how many bytes sent on a TCP connection the peer
// has acknowledged, and for how long in all the connection was busy
// sending (had data in flight or waiting).
func tcpProgress(c *conn) (acked uint64, busy time.Duration, ok bool) {
	r := &c.tinfo
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.get() {
		return 0, 0, false
	}
	return r.info.Bytes_acked, time.Duration(r.info.Busy_time) * time.Microsecond, true
}

// setUserTimeout makes data left unacknowledged for d fail the connection
// (TCP_USER_TIMEOUT).
func setUserTimeout(tc *net.TCPConn, d time.Duration) {
	raw, err := tc.SyscallConn()
	if err != nil {
		return
	}
	raw.Control(func(fd uintptr) {
		unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	})
}

// tcpClose is Linux's TCP_CLOSE state, where a reset connection ends.
const tcpClose = 7

// sendState reports whether data sent on a TCP connection is not yet
// acknowledged by the peer's host (unsent or in flight), whether that is
// the network's doing rather than the peer's full receive window (some is
// in flight, or the peer's window is open and the data still waits), and
// how long ago the last acknowledgement came. A connection that was reset
// counts as holding unacknowledged data the network does not take.
func sendState(c *conn) (unacked, blocked bool, ackAge time.Duration, ok bool) {
	r := &c.tinfo
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.get() {
		return false, false, 0, false
	}
	info := &r.info
	if info.State == tcpClose {
		// Reset: the kernel dropped what was not acknowledged, so
		// nothing looks pending, yet the peer may not have it all.
		return true, true, time.Duration(math.MaxInt64), true
	}
	// Snd_wnd (Linux 5.4 and later; zero before) tells a full receive
	// window from a link that takes nothing.
	return info.Unacked > 0 || info.Notsent_bytes > 0, info.Unacked > 0 || info.Snd_wnd > 0,
		time.Duration(info.Last_ack_recv) * time.Millisecond, true
}

// streamCounts returns how many bytes have been written on a TCP
// connection (sent once, or still unsent) and how many of them the peer's
// host acknowledged, both counted from the connection's start.
func streamCounts(c *conn) (written, acked uint64, ok bool) {
	r := &c.tinfo
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.get() {
		return 0, 0, false
	}
	info := &r.info
	return info.Bytes_sent - info.Bytes_retrans + uint64(info.Notsent_bytes), info.Bytes_acked, true
}

// timeouts returns how many retransmission timeouts in a row the oldest
// unacknowledged segment of a TCP connection has met (0 while acks come).
func timeouts(c *conn) int {
	r := &c.tinfo
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.get() {
		return 0
	}
	return int(r.info.Retransmits)
}

package tcp

import (
	"math"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpInfo returns the kernel's smoothed round-trip time and count of
// retransmitted segments for a TCP connection.
func tcpInfo(nc net.Conn) (rtt time.Duration, retrans uint32, ok bool) {
	info := getTCPInfo(nc)
	if info == nil {
		return 0, 0, false
	}
	return time.Duration(info.Rtt) * time.Microsecond, info.Total_retrans, true
}

// tcpProgress returns how many bytes sent on a TCP connection the peer
// has acknowledged, and for how long in all the connection was busy
// sending (had data in flight or waiting).
func tcpProgress(nc net.Conn) (acked uint64, busy time.Duration, ok bool) {
	info := getTCPInfo(nc)
	if info == nil {
		return 0, 0, false
	}
	return info.Bytes_acked, time.Duration(info.Busy_time) * time.Microsecond, true
}

func getTCPInfo(nc net.Conn) *unix.TCPInfo {
	sc, isSC := nc.(syscall.Conn)
	if !isSC {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var info *unix.TCPInfo
	cerr := raw.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	})
	if cerr != nil || err != nil {
		return nil
	}
	return info
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
func sendState(nc net.Conn) (unacked, blocked bool, ackAge time.Duration, ok bool) {
	info := getTCPInfo(nc)
	if info == nil {
		return false, false, 0, false
	}
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
func streamCounts(nc net.Conn) (written, acked uint64, ok bool) {
	info := getTCPInfo(nc)
	if info == nil {
		return 0, 0, false
	}
	return info.Bytes_sent - info.Bytes_retrans + uint64(info.Notsent_bytes), info.Bytes_acked, true
}

// timeouts returns how many retransmission timeouts in a row the oldest
// unacknowledged segment of a TCP connection has met (0 while acks come).
func timeouts(nc net.Conn) int {
	info := getTCPInfo(nc)
	if info == nil {
		return 0
	}
	return int(info.Retransmits)
}

//go:build !linux

package tcp

import (
	"net"
	"time"
)

// tcpInfoReader holds nothing where TCP_INFO is not read.
type tcpInfoReader struct{}

func (*tcpInfoReader) init(net.Conn) {}

// tcpInfo reports nothing where TCP_INFO is not read.
func tcpInfo(*conn) (rtt time.Duration, retrans uint32, ok bool) { return 0, 0, false }

// tcpProgress reports nothing where TCP_INFO is not read.
func tcpProgress(*conn) (acked uint64, busy time.Duration, ok bool) { return 0, 0, false }

// setUserTimeout does nothing where there is no TCP_USER_TIMEOUT.
func setUserTimeout(*net.TCPConn, time.Duration) {}

// sendState reports nothing where TCP_INFO is not read: paths are not
// retired there.
func sendState(*conn) (unacked, blocked bool, ackAge time.Duration, ok bool) {
	return false, false, 0, false
}

func streamCounts(*conn) (written, acked uint64, ok bool) { return 0, 0, false }

func timeouts(*conn) int { return 0 }

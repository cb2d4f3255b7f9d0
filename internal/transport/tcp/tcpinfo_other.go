//go:build !linux

package tcp

import (
	"net"
	"time"
)

// tcpInfo reports nothing where TCP_INFO is not read.
func tcpInfo(net.Conn) (rtt time.Duration, retrans uint32, ok bool) { return 0, 0, false }

// tcpProgress reports nothing where TCP_INFO is not read.
func tcpProgress(net.Conn) (acked uint64, busy time.Duration, ok bool) { return 0, 0, false }

// setUserTimeout does nothing where there is no TCP_USER_TIMEOUT.
func setUserTimeout(*net.TCPConn, time.Duration) {}

// sendState reports nothing where TCP_INFO is not read: paths are not
// retired there.
func sendState(net.Conn) (unacked, blocked bool, ackAge time.Duration, ok bool) {
	return false, false, 0, false
}

func streamCounts(net.Conn) (written, acked uint64, ok bool) { return 0, 0, false }

func timeouts(net.Conn) int { return 0 }

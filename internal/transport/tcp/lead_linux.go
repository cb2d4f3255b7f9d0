//go:build linux

package tcp

import (
	"net"

	"golang.org/x/sys/unix"
)

// queuedBytes returns how many received bytes wait in nc's socket.
func queuedBytes(nc net.Conn) (int, bool) {
	raw, ok := rawConn(nc)
	if !ok {
		return 0, false
	}
	n, ierr := 0, error(nil)
	if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}

// peekBytes copies into b, without taking them and without waiting, the
// received bytes at the front of nc's socket.
func peekBytes(nc net.Conn, b []byte) int {
	raw, ok := rawConn(nc)
	if !ok {
		return 0
	}
	n := 0
	raw.Control(func(fd uintptr) {
		m, _, err := unix.Recvfrom(int(fd), b, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		if err == nil && m > 0 {
			n = m
		}
	})
	return n
}

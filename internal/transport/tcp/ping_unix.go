//go:build unix

package tcp

import (
	"net"
	"syscall"

	"github.com/hcomm-go/hcomm/internal/wire"
	"golang.org/x/sys/unix"
)

// drainPings discards, without waiting, the whole ping frames at the head
// of nc's receive buffer, stopping at anything else. The caller holds the
// connection's rmu, at a frame boundary.
func drainPings(nc net.Conn) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	var b [wire.FrameHeaderSize]byte
	raw.Control(func(fd uintptr) {
		for range 1 << 12 {
			n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			if err != nil || n < len(b) {
				return
			}
			var h wire.FrameHeader
			if h.Unmarshal(b[:]) != nil || h.Type != wire.FramePing {
				return
			}
			if n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_DONTWAIT); err != nil || n < len(b) {
				return
			}
		}
	})
}

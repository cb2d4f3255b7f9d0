//go:build unix && !linux

package tcp

import (
	"net"

	"github.com/hcomm-go/hcomm/internal/wire"
	"golang.org/x/sys/unix"
)

// drainPings (here; on Linux sockPeek's, allocation-free) discards, without waiting, the whole ping frames at the head
// of nc's receive buffer, stopping at anything else, and returns how many
// bytes it took off the stream. The caller holds the connection's rmu, at
// a frame boundary, and counts them as read (conn.rread).
func drainPings(nc net.Conn) int {
	raw, ok := rawConn(nc)
	if !ok {
		return 0
	}
	var b [wire.FrameHeaderSize]byte
	took := 0
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
			n, _, err = unix.Recvfrom(int(fd), b[:], unix.MSG_DONTWAIT)
			took += max(n, 0)
			if err != nil || n < len(b) {
				return
			}
		}
	})
	return took
}

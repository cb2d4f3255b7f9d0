//go:build unix

package tcp

import (
	"net"

	"golang.org/x/sys/unix"
)

// discardMax bounds what discardQueued reads: a peer that keeps sending
// is not waited for.
const discardMax = 4 << 20

// discardQueued reads and throws away, without waiting, what the peer
// sent that is already in the kernel's receive buffer of nc, before nc is
// closed. A socket closed with unread data sends a reset instead of a FIN,
// and a reset throws away what this end has not transmitted yet: the tail
// of a last message the peer is still reading.
func discardQueued(nc net.Conn) {
	raw, ok := rawConn(nc)
	if !ok {
		return
	}
	var buf [16 << 10]byte
	raw.Control(func(fd uintptr) {
		for got := 0; got < discardMax; {
			n, _, err := unix.Recvfrom(int(fd), buf[:], unix.MSG_DONTWAIT)
			if n <= 0 || err != nil {
				return
			}
			got += n
		}
	})
}

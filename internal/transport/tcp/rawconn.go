package tcp

import (
	"net"
	"syscall"
)

// rawConn returns access to nc's descriptor, or false when nc does not
// expose one (not a socket, or already closed).
func rawConn(nc net.Conn) (syscall.RawConn, bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, false
	}
	raw, err := sc.SyscallConn()
	return raw, err == nil
}

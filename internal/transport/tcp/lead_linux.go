//go:build linux

package tcp

import (
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hcomm-go/hcomm/internal/wire"
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
}

// init readies p for nc.
func (p *sockPeek) init(nc net.Conn) {
	if raw, ok := rawConn(nc); ok {
		p.raw, p.fn = raw, p.read
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

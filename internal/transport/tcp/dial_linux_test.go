package tcp

import (
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// deafListener returns the address of a listening socket that never
// accepts and whose accept queue is full, so that connection attempts to
// it get no answer (the kernel drops their SYNs): an address that does not
// reach its peer, without the immediate refusal of a closed port. closeIt
// closes the socket and the connection filling its queue (also done at
// the test's end), after which the address can be listened on again.
func deafListener(t *testing.T, ip string) (addr string, closeIt func()) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var c net.Conn
	var once sync.Once
	closeIt = func() {
		once.Do(func() {
			syscall.Close(fd)
			if c != nil {
				c.Close()
			}
		})
	}
	t.Cleanup(closeIt)
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	sa := &syscall.SockaddrInet4{}
	copy(sa.Addr[:], net.ParseIP(ip).To4())
	if err := syscall.Bind(fd, sa); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	got, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr = net.JoinHostPort(ip, strconv.Itoa(got.(*syscall.SockaddrInet4).Port))
	// A backlog of 0 queues one connection: fill it.
	if c, err = net.Dial("tcp", addr); err != nil {
		t.Fatal(err)
	}
	return addr, closeIt
}

// TestPathNoAnswer: an extra address that never answers (its SYNs are
// dropped) is given up once the peer's other path answered, after the
// grace rather than the probe's full timeout, and the pair works on the
// path left.
func TestPathNoAnswer(t *testing.T) {
	deaf, _ := deafListener(t, "127.0.0.3")
	trs, logs := twoRankPaths(t, 1, deaf)
	checkPair(t, trs, 1)
	if l := logs.String(); !strings.Contains(l, "path does not reach the peer; dropped") || !strings.Contains(l, errNoAnswer.Error()) {
		t.Errorf("no log line for the path dropped for not answering:\n%s", l)
	}
}

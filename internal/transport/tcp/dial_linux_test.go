package tcp

import (
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// deafListener returns the address of a listening socket that never
// accepts and whose accept queue is full, so that connection attempts to
// it get no answer (the kernel drops their SYNs): an address that does not
// reach its peer, without the immediate refusal of a closed port.
func deafListener(t *testing.T, ip string) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
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
	addr := net.JoinHostPort(ip, strconv.Itoa(got.(*syscall.SockaddrInet4).Port))
	// A backlog of 0 queues one connection: fill it.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return addr
}

// TestPathNoAnswer: an extra address that never answers (its SYNs are
// dropped) is given up once the peer's other path answered, after the
// grace rather than the probe's full timeout, and the pair works on the
// path left.
func TestPathNoAnswer(t *testing.T) {
	trs, logs := twoRankPaths(t, 1, deafListener(t, "127.0.0.3"))
	checkPair(t, trs, 1)
	if l := logs.String(); !strings.Contains(l, "path does not reach the peer; dropped") || !strings.Contains(l, errNoAnswer.Error()) {
		t.Errorf("no log line for the path dropped for not answering:\n%s", l)
	}
}

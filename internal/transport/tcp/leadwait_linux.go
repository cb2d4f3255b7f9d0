package tcp

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// leadWait lets a receive wait until its lead connection has bytes to
// read, and be woken from that wait, without allocating (see
// peer.watchRepairs). The wait reads nothing: it blocks in the runtime's
// network poller on an epoll instance that holds the lead's descriptor,
// through an *os.File. A wake-up sets a past read deadline on that file,
// as a wake-up of a read of the connection itself would on the
// connection; but where net.Conn's Read (and its RawConn's) wraps the
// deadline error in a new *net.OpError every time, os's RawConn returns
// the poller's error values as they are.
//
// The epoll instance keeps no reference that would hold the connection
// open: closing the connection takes its descriptor out of the instance.
// A leadWait belongs to a receive gate; the gate's mutex guards it, except
// the blocking wait, which only the receive in progress runs.
type leadWait struct {
	c   *conn // the connection the instance watches; nil before the first wait
	f   *os.File
	raw syscall.RawConn
	fn  func(fd uintptr) bool // f's readiness test, made once
	ev  [1]unix.EpollEvent
	d   time.Time // the read deadline f has, or is to have once made
	off bool      // closed, or epoll cannot be used here
}

// prepare makes the instance watch c, if it does not already. It reports
// false when the wait is not available (the caller reads c instead).
func (w *leadWait) prepare(c *conn) bool {
	if w.off {
		return false
	}
	if w.c == c {
		return true
	}
	w.drop()
	rc, ok := rawConn(c.nc)
	if !ok {
		return false
	}
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		w.off = true
		return false
	}
	var cerr error
	err = rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP}
		cerr = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.SetNonblock(ep, true)
	}
	if err != nil {
		unix.Close(ep)
		return false
	}
	f := os.NewFile(uintptr(ep), "tcp-lead-wait")
	raw, err := f.SyscallConn()
	if err == nil {
		err = f.SetReadDeadline(w.d) // fails if the poller does not take it
	}
	if err != nil {
		f.Close()
		w.off = true
		return false
	}
	if w.fn == nil {
		w.fn = w.ready
	}
	w.c, w.f, w.raw = c, f, raw
	return true
}

// ready is the readiness test the poller calls: whether the watched
// connection has something to read (bytes, its end, or an error).
func (w *leadWait) ready(fd uintptr) bool {
	for {
		n, err := unix.EpollWait(int(fd), w.ev[:], 0)
		if err == unix.EINTR {
			continue
		}
		// An error is left to the connection's read to meet.
		return n > 0 || err != nil
	}
}

// wait blocks until the watched connection has something to read, or
// until woken (a past deadline) or closed. It returns nil when there is
// something to read. The caller does not hold the gate's mutex.
func (w *leadWait) wait(raw syscall.RawConn, fn func(uintptr) bool) error {
	return raw.Read(fn)
}

// setDeadline gives the wait the read deadline d.
func (w *leadWait) setDeadline(d time.Time) {
	w.d = d
	if w.f != nil {
		w.f.SetReadDeadline(d)
	}
}

// drop closes the epoll instance, if any, waking a wait on it.
func (w *leadWait) drop() {
	if w.f != nil {
		w.f.Close()
	}
	w.c, w.f, w.raw = nil, nil, nil
}

// close ends the wait for good.
func (w *leadWait) close() {
	w.drop()
	w.off = true
}

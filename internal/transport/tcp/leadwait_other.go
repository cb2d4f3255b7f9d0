//go:build !linux

package tcp

import (
	"syscall"
	"time"
)

// leadWait is the allocation-free wait of a receive for its lead
// connection (leadwait_linux.go). Elsewhere there is none: the receive
// reads the connection, and a wake-up sets a past deadline on it.
type leadWait struct {
	raw syscall.RawConn
	fn  func(fd uintptr) bool
}

func (w *leadWait) prepare(*conn) bool { return false }

func (w *leadWait) wait(syscall.RawConn, func(uintptr) bool) error { return nil }

func (w *leadWait) setDeadline(time.Time) {}

func (w *leadWait) close() {}

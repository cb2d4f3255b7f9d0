//go:build unix

package tcp

import (
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hcomm-go/hcomm/internal/spin"
)

// setPoll turns polled reads on for d (if positive and the connection
// exposes its descriptor).
func (c *conn) setPoll(d time.Duration, yield bool, sending *atomic.Int32) {
	if d <= 0 {
		return
	}
	raw, ok := rawConn(c.nc)
	if !ok {
		return
	}
	c.raw, c.pollFor, c.yield, c.sending = raw, d, yield, sending
	c.ahead = make([]byte, aheadSize)
	c.pollFn = c.poll
}

// poll is readPolled's callback: it reads until rbuf is full (true), the
// stream ends or fails (true, with rerr), or pollFor passes without data
// (false: wait in the poller, which calls it again once data is there).
func (c *conn) poll(fd uintptr) bool {
	var start time.Time
	for i := 0; ; i++ {
		// A short destination (a frame header) is read through ahead,
		// which also takes the bytes that came after it: the payload
		// and the next small frames, read then without a system call.
		var m int
		var err error
		if need := len(c.rbuf) - c.rn; need < len(c.ahead) {
			m, err = unix.Read(int(fd), c.ahead)
			if m > need {
				c.aoff, c.aend = need, m
				m = need
			}
			copy(c.rbuf[c.rn:], c.ahead[:max(m, 0)])
		} else {
			m, err = unix.Read(int(fd), c.rbuf[c.rn:])
		}
		switch {
		case m > 0:
			c.rn += m
			if c.rn == len(c.rbuf) {
				return true
			}
			start, i = time.Time{}, 0 // progress: poll afresh
			continue
		case err == nil: // end of stream
			c.rerr = io.EOF
			if c.rn > 0 {
				c.rerr = io.ErrUnexpectedEOF
			}
			return true
		case err == unix.EINTR:
			continue
		case err != unix.EAGAIN:
			c.rerr = os.NewSyscallError("read", err)
			return true
		}
		if c.sending.Load() > 0 {
			return false
		}
		if i%8 == 7 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > c.pollFor {
				return false
			}
		}
		// Polling holds this goroutine's P: let the process's other
		// goroutines run (with GOMAXPROCS 1 they would wait for the
		// whole poll), and other processes if the CPUs are shared.
		runtime.Gosched()
		if c.yield {
			spin.YieldCPU()
		}
	}
}

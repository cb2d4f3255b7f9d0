package store

import (
	"log/slog"
	"sync"
	"time"
)

// rateLog writes at most one warning every so often: the first event of a
// period is logged as it comes (a sample), the others are only counted, and
// the count is reported with the next line, or by flush. A flood of refused
// connections thus costs a few lines, not one per connection.
type rateLog struct {
	log   *slog.Logger
	every time.Duration

	mu         sync.Mutex
	last       time.Time // when the last line was written
	suppressed int       // events since then that were not logged
	msg        string    // the message of the last suppressed event
}

// warn logs msg with args, or counts it when a line was written less than
// every ago.
func (l *rateLog) warn(msg string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	if !l.last.IsZero() && now.Sub(l.last) < l.every {
		l.suppressed++
		l.msg = msg
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.suppressed, l.last = 0, now
	l.mu.Unlock()
	if n > 0 {
		args = append(args, "not_logged_since_last", n)
	}
	l.log.Warn(msg, args...)
}

// flush reports the events counted since the last line.
func (l *rateLog) flush() {
	l.mu.Lock()
	n, msg := l.suppressed, l.msg
	l.suppressed = 0
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn(msg, "not_logged_since_last", n)
	}
}

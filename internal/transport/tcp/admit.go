package tcp

import (
	"log/slog"
	"net"
	"sync"
	"time"
)

// Limits on connections that have not yet proven they belong to the job.
// Strangers cannot keep a rank from its peers: past a limit the oldest
// unproven connection (of the same address, or of the address holding the
// most) is closed to make room, so a dialer that answers the challenge at
// once gets through a flood, and a connection whose proof verified no
// longer counts.
const (
	// maxPendingHandshakes bounds the unproven connections in all.
	maxPendingHandshakes = 256
	// maxPendingPerSource bounds the unproven connections from one IP
	// address.
	maxPendingPerSource = 64
)

// refusalLogEvery is the least time between two log lines about refused
// connections; refusals in between are counted and the next line gives
// their number and a sample. (A variable for tests.)
var refusalLogEvery = 10 * time.Second

// pendingConn is an accepted connection still in its handshake.
type pendingConn struct {
	nc     net.Conn
	remote string // address, for logs
	source string // IP address, for the per-source limit
	start  time.Time
	proven bool // the dialer's proof verified: no longer limited
	gone   bool // removed from the table (evicted or released)
}

// admit enters nc in the table of pending handshakes. If that breaks a
// limit it removes, and returns, the oldest unproven connection of nc's
// source or, past the total limit, of the source with the most; the
// caller closes it.
func (t *Transport) admit(nc net.Conn) (pc, evicted *pendingConn) {
	remote := nc.RemoteAddr().String()
	source := remote
	if h, _, err := net.SplitHostPort(remote); err == nil {
		source = h
	}
	pc = &pendingConn{nc: nc, remote: remote, source: source, start: time.Now()}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.perSource[source] >= maxPendingPerSource:
		evicted = t.oldestFrom(source)
	case t.unproven >= maxPendingHandshakes:
		heaviest, most := "", 0
		for s, n := range t.perSource {
			if n > most {
				heaviest, most = s, n
			}
		}
		evicted = t.oldestFrom(heaviest)
	}
	if evicted != nil {
		t.removeLocked(evicted)
	}
	t.pending[pc] = struct{}{}
	t.perSource[source]++
	t.unproven++
	return pc, evicted
}

// oldestFrom returns the oldest unproven connection from source.
func (t *Transport) oldestFrom(source string) *pendingConn {
	var old *pendingConn
	for pc := range t.pending {
		if !pc.proven && pc.source == source && (old == nil || pc.start.Before(old.start)) {
			old = pc
		}
	}
	return old
}

func (t *Transport) removeLocked(pc *pendingConn) {
	if pc.gone {
		return
	}
	pc.gone = true
	delete(t.pending, pc)
	if !pc.proven {
		t.unproven--
		if t.perSource[pc.source]--; t.perSource[pc.source] <= 0 {
			delete(t.perSource, pc.source)
		}
	}
}

// authenticated moves pc out of the limits once its dialer's proof
// verified. It reports false if pc was evicted meanwhile.
func (t *Transport) authenticated(pc *pendingConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if pc.gone {
		return false
	}
	pc.proven = true
	t.unproven--
	if t.perSource[pc.source]--; t.perSource[pc.source] <= 0 {
		delete(t.perSource, pc.source)
	}
	return true
}

// release removes pc from the table at the end of its handshake.
func (t *Transport) release(pc *pendingConn) {
	t.mu.Lock()
	t.removeLocked(pc)
	t.mu.Unlock()
}

// refusalLog logs refused connections at most once per interval: the first
// refusal after a quiet interval at once, later ones as a count with a
// sample when the interval ends.
type refusalLog struct {
	log   *slog.Logger
	every time.Duration

	mu      sync.Mutex
	last    time.Time // when the last line was written
	count   int       // refusals not yet logged
	sample  []any     // attributes of the first of them
	timer   *time.Timer
	stopped bool
}

func (l *refusalLog) note(remote string, claimed int, reason string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	now := time.Now()
	if l.count == 0 && now.Sub(l.last) >= l.every {
		l.last = now
		l.log.Warn("tcp: refused connection", "remote", remote, "claimed_rank", claimed, "reason", reason)
		return
	}
	l.count++
	if l.count == 1 {
		l.sample = []any{"sample_remote", remote, "sample_claimed_rank", claimed, "sample_reason", reason}
		l.timer = time.AfterFunc(l.every-now.Sub(l.last), l.flush)
	}
}

// flush logs the refusals counted so far.
func (l *refusalLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.flushLocked()
}

func (l *refusalLog) flushLocked() {
	if l.count == 0 {
		return
	}
	l.log.Warn("tcp: refused connections", append([]any{"count", l.count, "since", l.last.Format(time.RFC3339)}, l.sample...)...)
	l.last = time.Now()
	l.count = 0
	l.sample = nil
}

// stop logs what is left and ends the logging.
func (l *refusalLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.flushLocked()
	l.stopped = true
}

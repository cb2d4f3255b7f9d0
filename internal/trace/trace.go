// Package trace is the flight recorder: each communicator keeps its last
// collectives (sequence number, call, state, timestamps) in a fixed ring, so
// that a stuck or failed job can say who was where.
package trace

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hcomm-go/hcomm/internal/wire"
)

// State is where a recorded operation is.
type State uint8

const (
	Running State = iota + 1
	Done
	Failed
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Done:
		return "done"
	case Failed:
		return "failed"
	}
	return "?"
}

// Entry is one recorded operation.
type Entry struct {
	Peer  int // the peer of a Send or Recv (BeginP2P)
	Seq   uint64
	Name  string           // the API call, e.g. "AllGatherV"
	FP    wire.Fingerprint // what the call was
	State State
	Start time.Time
	End   time.Time
	Err   string
	// at is when an operation recorded by Record ended, as the Since of
	// the recorder's clock, once stamped; Start and End are zero in the
	// ring until read.
	at time.Duration
}

// Clock tells the time from one wall-clock reading and the monotonic clock
// since. Its Now costs one monotonic clock read, where time.Now reads both
// clocks (about 70 ns on some virtual machines, a tenth of a small
// collective); it drifts from the wall clock only as far as the system
// clock is stepped while it runs.
type Clock struct{ base time.Time }

// NewClock returns a Clock set to the current time.
func NewClock() Clock { return Clock{base: time.Now()} }

// Now returns the current time, with a monotonic reading. A zero Clock
// falls back to time.Now.
func (c Clock) Now() time.Time {
	if c.base.IsZero() {
		return time.Now()
	}
	return c.base.Add(time.Since(c.base))
}

// Since returns the time since the clock's base: one monotonic clock
// read without time.Time's arithmetic, for a timestamp At turns into a
// time later.
func (c Clock) Since() time.Duration { return time.Since(c.origin()) }

// At returns the time d after the clock's base.
func (c Clock) At(d time.Duration) time.Time { return c.origin().Add(d) }

func (c Clock) origin() time.Time {
	if c.base.IsZero() {
		return procBase
	}
	return c.base
}

// procBase is a zero Clock's base.
var procBase = time.Now()

// Size is the number of operations a Recorder keeps.
const Size = 64

// A Timer is the recorder's tick: a *time.Timer, or a test's.
type Timer interface {
	Reset(time.Duration) bool
	Stop() bool
}

// Recorder keeps the last Size operations of one communicator. Begin and
// End do not allocate (except End's error text).
type Recorder struct {
	mu      sync.Mutex
	clock   Clock // Record's times are its Since
	pending int   // the last entries, recorded by Record, have no time yet
	ticking bool  // tick is armed
	stopped bool  // Stop was called: no tick any more
	tick    Timer // stamps the pending entries every stampEvery while there are any
	ring    [Size]Entry
	next    int // total recorded
	last    int // the slot of the last collective recorded, -1 before any
	colls   int // collectives recorded
	entered uint64
	done    uint64 // highest sequence number completed successfully

	// AfterFunc, if set before the first Record, makes the tick instead
	// of time.AfterFunc (tests).
	AfterFunc func(d time.Duration, f func()) Timer
}

// Begin records that the operation fp.Seq, called as name, started at
// start, and returns its slot. start should carry a monotonic reading (as
// from time.Now or a Clock), which End measures the operation against.
func (r *Recorder) Begin(name string, fp *wire.Fingerprint, start time.Time) int {
	r.mu.Lock()
	slot := r.put(name, fp, start, Running)
	r.mu.Unlock()
	return slot
}

// put records operation fp.Seq as in state st (Running, or Done for an
// operation Record records) from start, under r.mu, and returns its slot.
func (r *Recorder) put(name string, fp *wire.Fingerprint, start time.Time, st State) int {
	if r.pending > 0 && !start.IsZero() {
		// What was recorded before ended before this started.
		r.stamp(start.Sub(r.clock.origin()))
	}
	slot := r.next % Size
	// Field by field: a composite literal would be built on the stack and
	// copied, its wide loads stalling on its narrow stores.
	e := &r.ring[slot]
	e.Peer, e.Seq, e.Name, e.State = 0, fp.Seq, name, st
	e.FP.Seq, e.FP.Coll, e.FP.DType, e.FP.Op, e.FP.Root, e.FP.Count = fp.Seq, fp.Coll, fp.DType, fp.Op, fp.Root, fp.Count
	e.Start, e.End, e.Err, e.at = start, time.Time{}, "", 0
	r.next++
	// Point-to-point calls are numbered per peer and direction: they are
	// recorded, but the collective sequence is what Snapshot reports.
	if fp.Coll != wire.CollSendRecv {
		r.entered = fp.Seq
		r.last, r.colls = slot, r.colls+1
	}
	return slot
}

// BeginP2P is Begin for a Send or Recv with peer.
func (r *Recorder) BeginP2P(name string, fp *wire.Fingerprint, peer int, start time.Time) int {
	r.mu.Lock()
	slot := r.put(name, fp, start, Running)
	r.ring[slot].Peer = peer
	r.mu.Unlock()
	return slot
}

// SetClock sets the clock Record's times come from.
func (r *Recorder) SetClock(c Clock) {
	r.mu.Lock()
	r.clock = c
	r.mu.Unlock()
}

// stampEvery is how often a Recorder stamps the operations Record
// recorded without a time: their recorded end is late by up to this much
// (and by how late the process runs its timers).
const stampEvery = 10 * time.Millisecond

// Record records an operation that ended before it was begun: a small
// collective that completed without waiting is recorded once, in one lock
// section, with its start taken as its end. A successful one is recorded
// without reading the clock, which would be a sixth of its cost: the
// recorder stamps such operations with the time when it next reads the
// clock anyway (Begin, a reader of the ring) or, while there are any
// unstamped, every stampEvery, so their time is late by at most that.
func (r *Recorder) Record(name string, fp *wire.Fingerprint, err error) {
	r.mu.Lock()
	if err == nil && r.ticking && fp.Coll != wire.CollSendRecv {
		// The common case, a collective that succeeded while the tick is
		// armed (so the recorder is not stopped, and the tick stamps it),
		// in as few stores as it needs: the recorder was a quarter of the
		// root package's software in a small Broadcast.
		r.put(name, fp, time.Time{}, Done)
		if fp.Seq > r.done {
			r.done = fp.Seq
		}
		r.pending++
		r.mu.Unlock()
		return
	}
	e := &r.ring[r.put(name, fp, time.Time{}, Running)]
	r.pending++
	r.end(e, time.Time{}, err)
	switch {
	case err != nil || r.stopped:
		// Failures are rare and what a report is about: their time is
		// exact. A stopped recorder has no tick.
		r.stamp(r.clock.Since())
	case !r.ticking:
		r.ticking = true
		if r.tick == nil {
			after := r.AfterFunc
			if after == nil {
				after = func(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
			}
			r.tick = after(stampEvery, r.tock)
		} else {
			r.tick.Reset(stampEvery)
		}
	}
	r.mu.Unlock()
}

// tock stamps the pending entries, and stops ticking once none came in a
// period.
func (r *Recorder) tock() {
	r.mu.Lock()
	if r.pending > 0 && !r.stopped {
		r.stamp(r.clock.Since())
		r.tick.Reset(stampEvery)
	} else {
		r.ticking = false
	}
	r.mu.Unlock()
}

// Stop stops the tick for good (the communicator closed): the pending
// entries are stamped now, and later ones as they are recorded.
func (r *Recorder) Stop() {
	r.mu.Lock()
	r.stopped, r.ticking = true, false
	if r.tick != nil {
		r.tick.Stop()
	}
	if r.pending > 0 {
		r.stamp(r.clock.Since())
	}
	r.mu.Unlock()
}

// stamp gives the pending entries the end at, under r.mu.
func (r *Recorder) stamp(at time.Duration) {
	for i := max(r.next-r.pending, r.next-Size, 0); i < r.next; i++ {
		r.ring[i%Size].at = at
	}
	r.pending = 0
}

// entry returns the entry in slot i with its times filled in, under r.mu.
func (r *Recorder) entry(i int) Entry {
	e := r.ring[i]
	if e.End.IsZero() && e.State != Running {
		e.Start = r.clock.At(e.at)
		e.End = e.Start
	}
	return e
}

// Call renders an entry's call, e.g. "AllReduce(float32, 1024, sum)".
func (e *Entry) Call() string {
	s := e.FP.String()
	if i := strings.Index(s, " as "); i >= 0 {
		s = s[:i]
	}
	if e.Name != "" && !strings.HasPrefix(s, e.Name+"(") {
		if i := strings.IndexByte(s, '('); i >= 0 {
			s = e.Name + s[i:]
		}
	}
	return s
}

// End records how the operation in slot ended.
func (r *Recorder) End(slot int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := &r.ring[slot]
	r.end(e, e.Start.Add(time.Since(e.Start)), err)
}

// EndAt records how the operation in slot ended, and when.
func (r *Recorder) EndAt(slot int, err error, end time.Time) {
	r.mu.Lock()
	r.end(&r.ring[slot], end, err)
	r.mu.Unlock()
}

func (r *Recorder) end(e *Entry, end time.Time, err error) {
	e.End = end
	if err != nil {
		e.State = Failed
		e.Err = err.Error()
		return
	}
	e.State = Done
	if e.FP.Coll != wire.CollSendRecv && e.Seq > r.done {
		r.done = e.Seq
	}
}

// Snapshot is a recorder's summary, as published for culprit reports.
type Snapshot struct {
	Entered   uint64 `json:"entered"`   // last sequence number entered
	Call      string `json:"call"`      // that operation's call
	State     string `json:"state"`     // its state
	Completed uint64 `json:"completed"` // last sequence number completed
	ForMS     int64  `json:"for_ms"`    // how long it has been in that state
	// P2P lists the Sends and Recvs still running, as "Recv(float32, 4,
	// tag 7) from rank 0".
	P2P []string `json:"p2p,omitempty"`
	// Recent lists the last collectives (at most recentMax operations
	// back), oldest first, so that a stall check can compare any rank's
	// call of op #n with its own even when that rank has moved past it.
	Recent []SeqCall `json:"recent,omitempty"`
}

// recentMax bounds the operations Snapshot.Recent lists: a stall check
// asks about the operation it is in, which a peer entered at most a few
// operations ago.
const recentMax = 8

// SeqCall is one collective as Snapshot.Recent lists it.
type SeqCall struct {
	Seq  uint64 `json:"seq"`
	Call string `json:"call"`
}

// CallOf returns the call recorded for collective seq, if it is still in
// the ring.
func (r *Recorder) CallOf(seq uint64) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(r.next, Size)
	for i := r.next - n; i < r.next; i++ {
		if e := &r.ring[i%Size]; e.FP.Coll != wire.CollSendRecv && e.Seq == seq {
			return e.Call(), true
		}
	}
	return "", false
}

// Find returns the name and fingerprint recorded for collective seq, if
// it is still in the ring.
func (r *Recorder) Find(seq uint64) (string, wire.Fingerprint, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := min(r.next, Size)
	for i := r.next - 1; i >= r.next-n; i-- {
		if e := &r.ring[i%Size]; e.FP.Coll != wire.CollSendRecv && e.Seq == seq {
			return e.Name, e.FP, true
		}
	}
	return "", wire.Fingerprint{}, false
}

// Snapshot summarizes the recorder's collectives: the last entered and
// completed, and the state of the last (while it is still in the ring).
func (r *Recorder) Snapshot() Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending > 0 {
		r.stamp(r.clock.Since())
	}
	s := Snapshot{Entered: r.entered, Completed: r.done}
	if r.colls > 0 && r.ring[r.last].FP.Coll != wire.CollSendRecv {
		e := r.entry(r.last)
		s.Call, s.State = e.Call(), e.State.String()
		since := e.Start
		if e.State != Running {
			since = e.End
		}
		if !since.IsZero() {
			s.ForMS = time.Since(since).Milliseconds()
		}
	}
	for i := max(r.next-Size, 0); i < r.next; i++ {
		if e := &r.ring[i%Size]; e.FP.Coll == wire.CollSendRecv && e.State == Running {
			dir := " to rank "
			if e.Name == "Recv" {
				dir = " from rank "
			}
			s.P2P = append(s.P2P, e.Call()+dir+strconv.Itoa(e.Peer))
		}
	}
	n := min(r.next, recentMax)
	for i := r.next - n; i < r.next; i++ {
		if e := &r.ring[i%Size]; e.FP.Coll != wire.CollSendRecv {
			s.Recent = append(s.Recent, SeqCall{Seq: e.Seq, Call: e.Call()})
		}
	}
	return s
}

// Entries returns the recorded operations, oldest first.
func (r *Recorder) Entries() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending > 0 {
		r.stamp(r.clock.Since())
	}
	n := min(r.next, Size)
	out := make([]Entry, 0, n)
	for i := r.next - n; i < r.next; i++ {
		out = append(out, r.entry(i%Size))
	}
	return out
}

// Format writes the entries as text, one per line.
func (r *Recorder) Format() string {
	var b strings.Builder
	for _, e := range r.Entries() {

		fmt.Fprintf(&b, "#%d %s %s start=%s", e.Seq, e.Call(), e.State, e.Start.Format(time.RFC3339Nano))
		if !e.End.IsZero() {
			fmt.Fprintf(&b, " took=%v", e.End.Sub(e.Start))
		}
		if e.Err != "" {
			fmt.Fprintf(&b, " err=%q", e.Err)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

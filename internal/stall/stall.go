// Package stall is the mismatch stall check of a communicator.
//
// A collective whose ranks called different operations (op, type, count,
// root or reduction) can wait forever when no message ever carries one
// fingerprint to a rank holding the other: a Broadcast's root sends and
// finishes while the AllReduce ranks wait for each other. The stall check
// closes that gap: a collective still running First after it started
// compares its call with the same operation's call on every rank of the
// communicator — directly under NewLocal (Group), through the job's dump
// protocol (diag.States, CallsFromStates) across processes — and fails the
// communicator with an error matching errs.ErrMismatch naming the ranks
// that differ. Otherwise it looks again after twice the wait, so long
// operations cost a few checks, not one per tick.
package stall

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// First is how long a collective runs before its first stall check.
var First = 200 * time.Millisecond

// StatesWait bounds how long a check waits for the other processes'
// states.
const StatesWait = 500 * time.Millisecond

// A Comm is the communicator a Check watches.
type Comm interface {
	// Rank is this rank's number in the communicator.
	Rank() int
	// Healthy reports whether the communicator has neither failed nor
	// been closed.
	Healthy() bool
	// CallsOf returns each rank's call of collective seq as its flight
	// recorder has it ("" when unknown).
	CallsOf(seq uint64) []string
	// Mismatch fails the communicator: collective seq, called as name,
	// differs at rank peer (the first of those that differ); err matches
	// errs.ErrMismatch.
	Mismatch(seq uint64, name string, peer int, err error)
}

// A LateReporter is a Comm told, after each check that found no
// mismatch, which ranks had not entered the collective yet (Slow finds
// the persistent ones among them).
type LateReporter interface {
	Late(seq uint64, name string, late []int)
}

// Check is a communicator's stall checker. Its one timer is armed lazily,
// as opctx's is: a collective only records its number and start, without
// a lock, and the timer, when it fires, checks the collective running then
// (if it has run long enough) and re-arms itself for that one's next
// check; it disarms itself between collectives. A stream of short
// collectives costs a wake-up every First, not a timer operation each.
// The call a check compares is the one the communicator's flight recorder
// holds for the collective's number. The zero Check is ready once Init
// has named its communicator.
type Check struct {
	c   Comm
	rec *trace.Recorder
	// seq is the collective running, 0 if none; start is when it started
	// (nanoseconds after base), written before seq, so that fire, reading
	// seq, start and seq again, knows the start belongs to the seq it read.
	seq   atomic.Uint64
	start atomic.Int64
	armed atomic.Bool // the timer is armed or its fire is running
	base  time.Time

	mu      sync.Mutex // serializes arming, fire and Stop
	stopped bool
	checked uint64        // the collective the last check looked at
	delay   time.Duration // that collective's next check is due at start+delay
	timer   *time.Timer
	ref     *checkRef // the timer's hold on the check, cleared by Stop
	// beforeLapse, set by tests, runs as the timer is about to lapse for
	// want of a collective.
	beforeLapse func()
}

// Init names the communicator the check watches and its flight recorder.
func (s *Check) Init(c Comm, rec *trace.Recorder) {
	s.c, s.rec, s.base = c, rec, time.Now()
}

// Begin records that collective seq, already in the flight recorder,
// started at now. It takes no lock unless the timer is disarmed.
func (s *Check) Begin(seq uint64, now time.Time) {
	s.start.Store(int64(now.Sub(s.base)))
	s.seq.Store(seq)
	if !s.armed.Load() {
		s.arm()
	}
}

// arm arms the timer for the collective running, if it is not armed.
func (s *Check) arm() {
	s.mu.Lock()
	if !s.stopped && !s.armed.Load() {
		s.armed.Store(true)
		if s.timer == nil {
			s.ref = &checkRef{}
			s.ref.s.Store(s)
			s.timer = time.AfterFunc(First, s.ref.fire)
		} else {
			s.timer.Reset(First)
		}
	}
	s.mu.Unlock()
}

// End records that the collective ended.
func (s *Check) End() { s.seq.Store(0) }

// Stop stops the timer for good (the communicator's Close).
func (s *Check) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.seq.Store(0)
	if s.timer != nil {
		s.timer.Stop()
		s.ref.s.Store(nil)
	}
	s.mu.Unlock()
}

// checkRef is the timer's hold on its check: a stopped timer can stay in
// the runtime's timer heap, with its function, until its time would have
// come, and must not keep the communicator that long.
type checkRef struct{ s atomic.Pointer[Check] }

func (r *checkRef) fire() {
	if s := r.s.Load(); s != nil {
		s.fire()
	}
}

// running returns the collective running and when it started, or 0.
func (s *Check) running() (uint64, time.Time) {
	for {
		seq := s.seq.Load()
		start := s.start.Load()
		if seq == 0 || s.seq.Load() == seq {
			return seq, s.base.Add(time.Duration(start))
		}
	}
}

// idle reports whether the timer should lapse, collective seq being the
// one running (0: none): the check was stopped, the communicator failed,
// or no collective runs. In the last case a Begin may have found the
// timer armed just as it was lapsing; then idle re-arms it for that one.
func (s *Check) idle(seq uint64) bool {
	if !s.stopped && seq != 0 && s.c.Healthy() {
		return false
	}
	if s.beforeLapse != nil && seq == 0 {
		s.beforeLapse()
	}
	s.armed.Store(false)
	if s.stopped || seq != 0 || s.seq.Load() == 0 {
		return true
	}
	s.armed.Store(true)
	s.timer.Reset(First)
	return true
}

// fire runs when the timer fires: it checks the collective running if
// its check is due, and re-arms for the next one due.
func (s *Check) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, start := s.running()
	if s.idle(seq) {
		return
	}
	if seq != s.checked {
		s.checked, s.delay = seq, First
	}
	if left := s.delay - time.Since(start); left > 0 {
		s.timer.Reset(left)
		return
	}
	if name, fp, ok := s.rec.Find(seq); ok {
		// The check may ask other processes: s.mu is not held meanwhile.
		s.mu.Unlock()
		rank := s.c.Rank()
		calls := s.c.CallsOf(seq)
		if peer, err := Compare(rank, seq, name, &fp, calls); err != nil && s.c.Healthy() {
			s.c.Mismatch(seq, name, peer, err)
		} else if l, ok := s.c.(LateReporter); ok && err == nil {
			l.Late(seq, name, Late(rank, calls))
		}
		s.mu.Lock()
	}
	cur, _ := s.running()
	if s.idle(cur) {
		return
	}
	if cur == seq {
		s.delay *= 2
	}
	s.timer.Reset(max(s.delay-time.Since(start), time.Millisecond))
}

// Compare returns an error matching errs.ErrMismatch, and the first rank
// that differs, if any rank's call of collective seq in calls differs
// from rank's own (fp, called as name); nil if none is known to.
func Compare(rank int, seq uint64, name string, fp *wire.Fingerprint, calls []string) (int, error) {
	e := trace.Entry{Name: name, FP: *fp}
	mine := e.Call()
	var differ []int
	var what []string
	for r, call := range calls {
		if r == rank || call == "" || call == mine {
			continue
		}
		differ = append(differ, r)
		if len(what) < 4 {
			what = append(what, fmt.Sprintf("rank %d called %s", r, call))
		}
	}
	if differ == nil {
		return -1, nil
	}
	return differ[0], fmt.Errorf("%w: op #%d: rank %d called %s but %s (%s differ)",
		errs.ErrMismatch, seq, rank, mine, strings.Join(what, ", "), diag.RankList(differ))
}

// CallsFromStates fills calls[r] with rank r's call of collective seq as
// its dump-protocol state lists it (trace.Snapshot.Recent), leaving the
// ranks that did not answer or no longer list it as they are.
func CallsFromStates(states []*diag.CommState, seq uint64, calls []string) {
	for r, st := range states {
		if st == nil || r >= len(calls) {
			continue
		}
		for _, sc := range st.Recent {
			if sc.Seq == seq {
				calls[r] = sc.Call
			}
		}
	}
}

// Group is the flight recorders of one communicator's ranks in a NewLocal
// job, which their stall checks read directly.
type Group struct {
	mu   sync.Mutex
	recs []*trace.Recorder
	reg  *registry // the groups of the communicators Split derives
}

// registry holds the groups of one NewLocal call's communicators by id,
// each until all its ranks have taken it (as local.Fabric.Sub does), so
// that it holds no communicator for longer than they are in use.
type registry struct {
	mu sync.Mutex
	m  map[string]*subGroup
}

type subGroup struct {
	g       *Group
	claimed int
}

// NewGroup returns the group of a NewLocal job's first communicator of n
// ranks.
func NewGroup(n int) *Group {
	return &Group{recs: make([]*trace.Recorder, n), reg: &registry{m: map[string]*subGroup{}}}
}

// Set records rank r's flight recorder.
func (g *Group) Set(r int, rec *trace.Recorder) {
	g.mu.Lock()
	g.recs[r] = rec
	g.mu.Unlock()
}

// Leave forgets rank r's flight recorder (its communicator's Close), so
// that the group, which the other ranks' communicators hold, does not
// hold r's.
func (g *Group) Leave(r int) { g.Set(r, nil) }

// Sub returns the group of communicator id (size ranks) derived from g's;
// each of its ranks calls it once.
func (g *Group) Sub(id string, size int) *Group {
	g.reg.mu.Lock()
	defer g.reg.mu.Unlock()
	s := g.reg.m[id]
	if s == nil {
		s = &subGroup{g: &Group{recs: make([]*trace.Recorder, size), reg: g.reg}}
		g.reg.m[id] = s
	}
	if s.claimed++; s.claimed >= size {
		delete(g.reg.m, id)
	}
	return s.g
}

// CallsOf returns each rank's call of collective seq ("" when unknown:
// not entered yet, or out of its recorder's ring).
func (g *Group) CallsOf(seq uint64) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	calls := make([]string, len(g.recs))
	for r, rec := range g.recs {
		if rec != nil {
			calls[r], _ = rec.CallOf(seq)
		}
	}
	return calls
}

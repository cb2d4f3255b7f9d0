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
// as opctx's is: a collective only records its start, and the timer, when
// it fires, checks the collective running then (if it has run long
// enough) and re-arms itself for that one's next check; it stays disarmed
// between collectives. A stream of short collectives costs a wake-up
// every First, not a timer operation each. The zero Check is ready once
// Init has named its communicator.
type Check struct {
	c  Comm
	mu sync.Mutex
	// seq is the collective running, 0 if none. It is written under mu
	// when a collective starts and cleared without it when one ends (the
	// hot path takes mu once, not twice); name, fp and start belong to the
	// seq last written under mu.
	seq   atomic.Uint64
	name  string
	fp    wire.Fingerprint
	start time.Time
	delay time.Duration // the check is due at start+delay
	armed bool
	timer *time.Timer
}

// Init names the communicator the check watches.
func (s *Check) Init(c Comm) { s.c = c }

// Begin records that collective fp.Seq, called as name, started at now.
func (s *Check) Begin(name string, fp *wire.Fingerprint, now time.Time) {
	s.mu.Lock()
	s.name, s.fp, s.start, s.delay = name, *fp, now, First
	s.seq.Store(fp.Seq)
	if !s.armed {
		s.armed = true
		if s.timer == nil {
			s.timer = time.AfterFunc(First, s.fire)
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
	s.seq.Store(0)
	if s.timer != nil {
		s.timer.Stop()
	}
	s.armed = false
	s.mu.Unlock()
}

// fire runs when the timer fires: it checks the collective running if
// its check is due, and re-arms for the next one due.
func (s *Check) fire() {
	s.mu.Lock()
	if s.seq.Load() == 0 || !s.c.Healthy() {
		s.armed = false
		s.mu.Unlock()
		return
	}
	if left := s.delay - time.Since(s.start); left > 0 {
		s.timer.Reset(left)
		s.mu.Unlock()
		return
	}
	seq, name, fp := s.seq.Load(), s.name, s.fp
	s.mu.Unlock()
	rank := s.c.Rank()
	calls := s.c.CallsOf(seq)
	if peer, err := Compare(rank, seq, name, &fp, calls); err != nil && s.c.Healthy() {
		s.c.Mismatch(seq, name, peer, err)
	} else if l, ok := s.c.(LateReporter); ok && err == nil {
		l.Late(seq, name, Late(rank, calls))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq.Load() == 0 || !s.c.Healthy() {
		s.armed = false
		return
	}
	if s.seq.Load() == seq {
		s.delay *= 2
	}
	s.timer.Reset(max(s.delay-time.Since(s.start), time.Millisecond))
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

// registry holds the groups of one NewLocal call's communicators by id.
type registry struct {
	mu sync.Mutex
	m  map[string]*Group
}

// NewGroup returns the group of a NewLocal job's first communicator of n
// ranks.
func NewGroup(n int) *Group {
	return &Group{recs: make([]*trace.Recorder, n), reg: &registry{m: map[string]*Group{}}}
}

// Set records rank r's flight recorder.
func (g *Group) Set(r int, rec *trace.Recorder) {
	g.mu.Lock()
	g.recs[r] = rec
	g.mu.Unlock()
}

// Sub returns the group of communicator id (size ranks) derived from g's.
func (g *Group) Sub(id string, size int) *Group {
	g.reg.mu.Lock()
	defer g.reg.mu.Unlock()
	s := g.reg.m[id]
	if s == nil {
		s = &Group{recs: make([]*trace.Recorder, size), reg: g.reg}
		g.reg.m[id] = s
	}
	return s
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

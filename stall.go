package hcomm

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// A collective whose ranks called different operations (op, type, count,
// root or reduction) can wait forever when no message ever carries one
// fingerprint to a rank holding the other: a Broadcast's root sends and
// finishes while the AllReduce ranks wait for each other. The stall check
// closes that gap: a collective still running stallFirst after it started
// compares its call with the same operation's call on every rank of the
// communicator — directly under NewLocal, through the job's dump protocol
// (diag.States) across processes — and fails the communicator with
// ErrMismatch naming the ranks that differ. Otherwise it looks again after
// twice the wait, so long operations cost a few checks, not one per tick.

// stallFirst is how long a collective runs before its first stall check.
var stallFirst = 200 * time.Millisecond

// stallStatesWait bounds how long a check waits for the other processes'
// states.
const stallStatesWait = 500 * time.Millisecond

// stallCheck is a communicator's stall checker. Its one timer is armed
// lazily, as opctx's is: a collective only records its start, and the
// timer, when it fires, checks the collective running then (if it has run
// long enough) and re-arms itself for that one's next check; it stays
// disarmed between collectives. A stream of short collectives costs a
// wake-up every stallFirst, not a timer operation each.
type stallCheck struct {
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

// stallBegin records that collective fp.Seq, called as name, started at
// now.
func (c *Comm) stallBegin(name string, fp *wire.Fingerprint, now time.Time) {
	s := &c.stall
	s.mu.Lock()
	s.name, s.fp, s.start, s.delay = name, *fp, now, stallFirst
	s.seq.Store(fp.Seq)
	if !s.armed {
		s.armed = true
		if s.timer == nil {
			s.timer = time.AfterFunc(stallFirst, c.onStall)
		} else {
			s.timer.Reset(stallFirst)
		}
	}
	s.mu.Unlock()
}

// stallEnd records that the collective ended.
func (c *Comm) stallEnd() {
	c.stall.seq.Store(0)
}

// stallStop stops the timer for good (Close).
func (c *Comm) stallStop() {
	s := &c.stall
	s.mu.Lock()
	s.seq.Store(0)
	if s.timer != nil {
		s.timer.Stop()
	}
	s.armed = false
	s.mu.Unlock()
}

// onStall runs when the timer fires: it checks the collective running if
// its check is due, and re-arms for the next one due.
func (c *Comm) onStall() {
	s := &c.stall
	s.mu.Lock()
	if s.seq.Load() == 0 || c.state.Load() != stateOK {
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
	if err := c.compareCalls(seq, name, &fp); err != nil {
		if c.state.Load() == stateOK {
			c.fail(err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seq.Load() == 0 || c.state.Load() != stateOK {
		s.armed = false
		return
	}
	if s.seq.Load() == seq {
		s.delay *= 2
	}
	s.timer.Reset(max(s.delay-time.Since(s.start), time.Millisecond))
}

// compareCalls returns an ErrMismatch error if any rank's call of
// collective seq differs from this rank's, nil if none is known to.
func (c *Comm) compareCalls(seq uint64, name string, fp *wire.Fingerprint) error {
	e := trace.Entry{Name: name, FP: *fp}
	mine := e.Call()
	calls := c.callsOf(seq)
	var differ []int
	var what []string
	for r, call := range calls {
		if r == c.rank || call == "" || call == mine {
			continue
		}
		differ = append(differ, r)
		if len(what) < 4 {
			what = append(what, fmt.Sprintf("rank %d called %s", r, call))
		}
	}
	if differ == nil {
		return nil
	}
	err := fmt.Errorf("%w: op #%d: rank %d called %s but %s (%s differ)",
		ErrMismatch, seq, c.rank, mine, strings.Join(what, ", "), diag.RankList(differ))
	return &OpError{Op: name, Rank: c.rank, Peer: differ[0], Seq: seq, Err: err}
}

// callsOf returns each rank's call of collective seq as its flight
// recorder has it ("" when unknown: not entered yet, out of its ring, or
// no answer).
func (c *Comm) callsOf(seq uint64) []string {
	calls := make([]string, c.size)
	switch {
	case c.group != nil:
		for r := range calls {
			if p := c.group.at(r); p != nil {
				calls[r], _ = p.rec.CallOf(seq)
			}
		}
	case c.job != nil:
		states, err := c.job.States(c.id, c.members, stallStatesWait)
		if err != nil {
			return calls
		}
		for r, st := range states {
			if st == nil {
				continue
			}
			for _, sc := range st.Recent {
				if sc.Seq == seq {
					calls[r] = sc.Call
				}
			}
		}
	}
	return calls
}

// localGroup is the communicators of one communicator of a NewLocal job,
// which their stall checks read directly.
type localGroup struct {
	mu    sync.Mutex
	comms []*Comm
	reg   *localReg // the groups of the communicators Split derives
}

// localReg holds the groups of one NewLocal call's communicators by id.
type localReg struct {
	mu sync.Mutex
	m  map[string]*localGroup
}

func (g *localGroup) at(r int) *Comm {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.comms[r]
}

func (g *localGroup) set(r int, c *Comm) {
	g.mu.Lock()
	g.comms[r] = c
	g.mu.Unlock()
}

// sub returns the group of communicator id (size ranks) derived from g's.
func (g *localGroup) sub(id string, size int) *localGroup {
	g.reg.mu.Lock()
	defer g.reg.mu.Unlock()
	s := g.reg.m[id]
	if s == nil {
		s = &localGroup{comms: make([]*Comm, size), reg: g.reg}
		g.reg.m[id] = s
	}
	return s
}

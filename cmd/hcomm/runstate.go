package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/store"
)

// Before the launcher stops a job that is still running (--timeout, a
// signal, survivors still running after a rank failed), it asks every rank
// for its state through the store, with the request a timed-out rank makes
// for its culprit report (package hcomm, culprit.go): it sets
// hcomm/dump/<k> for the next k of the counter hcomm/dumpseq, and every
// process that has initialised hcomm answers under hcomm/state/<k>/<world
// rank> with each of its communicators' last operation entered and
// completed. The launcher prints what it received, one line per rank and
// communicator, and for each communicator who is waiting for whom, before it
// sends the signal that ends the ranks' flight recorders with them.

// The store keys of the dump protocol are internal/diag's.
const (
	// cardKeyFmt is where a process publishes its address card when it
	// joins the world communicator (internal/boot): a rank without one
	// is not (yet) an hcomm process, and is not waited for.
	cardKeyFmt = "hcomm/world/card/%d"
)

const (
	// stateWait bounds how long the launcher waits for the ranks'
	// states.
	stateWait = 1500 * time.Millisecond
	// cardWait bounds how long it looks for a rank's address card.
	cardWait = 300 * time.Millisecond
	// maxStateBytes is the largest state answer the launcher reads.
	maxStateBytes = 1 << 20
)

// procState is what a process publishes on a dump request.
type procState struct {
	World int         `json:"world"`
	PID   int         `json:"pid"`
	Comms []commState `json:"comms"`
}

// commState is one communicator's state in a procState.
type commState struct {
	Comm string `json:"comm"`
	Rank int    `json:"rank"`
	trace.Snapshot
}

// rankState is what the launcher learned about one rank.
type rankState struct {
	joined bool       // it published an address card
	state  *procState // its answer, or nil
}

// collectStates asks the ranks of a job of size ranks for their states
// through the store at addr, and returns what each answered. It returns
// nil when no rank has joined an hcomm communicator, or when the store
// cannot be reached; it returns within about stateWait, or when ctx ends.
func collectStates(ctx context.Context, addr, token string, size int) []rankState {
	ctx, cancel := context.WithTimeout(ctx, stateWait)
	defer cancel()
	c, err := store.Dial(ctx, addr, &store.ClientConfig{Token: token})
	if err != nil {
		return nil
	}
	defer c.Close()
	k, err := c.Add(ctx, diag.DumpSeqKey, 1)
	if err != nil {
		return nil
	}
	if err := c.Set(ctx, diag.DumpKey(k), []byte{1}); err != nil {
		return nil
	}
	out := make([]rankState, size)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 256)
	for r := range out {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			cctx, ccancel := context.WithTimeout(ctx, cardWait)
			_, err := c.Get(cctx, fmt.Sprintf(cardKeyFmt, r))
			ccancel()
			if err != nil {
				return
			}
			out[r].joined = true
			v, err := c.Get(ctx, diag.StateKey(k, r))
			var ps procState
			if err != nil || len(v) > maxStateBytes || json.Unmarshal(v, &ps) != nil {
				return
			}
			out[r].state = &ps
		})
	}
	wg.Wait()
	if !slices.ContainsFunc(out, func(s rankState) bool { return s.joined }) {
		return nil
	}
	return out
}

// stateLines describes the states: a line per rank and communicator, then
// a summary per communicator of where its ranks are.
func stateLines(states []rankState) []string {
	var lines []string
	type member struct {
		world int
		s     commState
	}
	var comms []string
	byComm := map[string][]member{}
	for r, rs := range states {
		switch {
		case !rs.joined:
			lines = append(lines, fmt.Sprintf("rank %d: has not joined hcomm (not started yet, or not an hcomm program)", r))
			continue
		case rs.state == nil:
			lines = append(lines, fmt.Sprintf("rank %d: did not answer (still in Init, hung, or cut off from the store)", r))
			continue
		case len(rs.state.Comms) == 0:
			lines = append(lines, fmt.Sprintf("rank %d (pid %d): no open communicator", r, rs.state.PID))
			continue
		}
		for _, cs := range rs.state.Comms {
			lines = append(lines, fmt.Sprintf("rank %d (pid %d): %s", r, rs.state.PID, describeComm(cs)))
			if _, ok := byComm[cs.Comm]; !ok {
				comms = append(comms, cs.Comm)
			}
			byComm[cs.Comm] = append(byComm[cs.Comm], member{r, cs})
		}
	}
	for _, id := range comms {
		ms := byComm[id]
		// The communicator's size is not in the answers; the world
		// communicator's is the job's, and no communicator is larger
		// (a rank number beyond it is a bad answer, left out).
		size := 0
		for _, m := range ms {
			if m.s.Rank < len(states) {
				size = max(size, m.s.Rank+1)
			}
		}
		if id == "world" {
			size = len(states)
		}
		ranks := make([]*trace.Snapshot, size)
		for _, m := range ms {
			if m.s.Rank >= 0 && m.s.Rank < size {
				ranks[m.s.Rank] = &m.s.Snapshot
			}
		}
		if id == "world" {
			// A rank that answered without the world communicator has
			// closed it.
			for r, rs := range states {
				if ranks[r] == nil && rs.state != nil {
					ranks[r] = &trace.Snapshot{State: closedState}
				}
			}
		}
		if s := summarize(ranks); s != "" {
			lines = append(lines, fmt.Sprintf("communicator %s: %s", id, s))
		}
	}
	return lines
}

// closedState marks, in a summary, a rank that answered without the
// communicator.
const closedState = "closed"

// describeComm says where one communicator of a rank is.
func describeComm(cs commState) string {
	name := fmt.Sprintf("communicator %s rank %d", cs.Comm, cs.Rank)
	if cs.Entered == 0 {
		return name + ": no operation yet"
	}
	s := fmt.Sprintf("%s: op #%d %s %s for %v", name, cs.Entered, cs.Call, cs.State,
		(time.Duration(cs.ForMS) * time.Millisecond).Round(time.Millisecond))
	if cs.State == "running" {
		s += fmt.Sprintf(" (last completed #%d)", cs.Completed)
	}
	return s
}

// summarize says where the ranks of one communicator are relative to the
// furthest operation any of them entered: "ranks 0-2 wait in op #7
// AllReduce(float32, 1024, sum); rank 3 last completed op #6 and has not
// entered #7". A nil entry is a rank that did not answer. It returns ""
// when every rank is done with the same operation (or closed the
// communicator).
func summarize(ranks []*trace.Snapshot) string {
	var seq uint64
	call := ""
	for _, s := range ranks {
		if s != nil && s.Entered > seq {
			seq, call = s.Entered, s.Call
		}
	}
	var g diag.Groups
	add := g.Add
	busy := false
	for r, s := range ranks {
		switch {
		case s == nil:
			add("did not answer", r)
			busy = true
		case s.State == closedState:
			add("closed it", r)
		case s.Entered == seq && s.State == "running":
			add(fmt.Sprintf("wait in op #%d %s", seq, call), r)
			busy = true
		case s.Entered == seq:
			add(fmt.Sprintf("%s op #%d %s", s.State, seq, call), r)
			busy = busy || s.State != "done"
		default:
			add(fmt.Sprintf("last completed op #%d and has not entered #%d", s.Completed, seq), r)
			busy = true
		}
	}
	if !busy {
		return ""
	}
	return g.String()
}

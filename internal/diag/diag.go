// Package diag makes a stuck or failed job explain itself: the culprit
// report for a timed-out operation, the failure notes ranks leave in the
// store, and the on-demand dump of flight recorders on a signal.
//
// Every process of a multi-process job runs a Watcher that waits on the
// store for a dump request. A rank whose operation times out asks for a
// dump (Report); every process that can still reach the store answers with
// the state of its communicators (the flight recorder's last operation
// entered and completed); the rank then says who everyone is waiting for,
// in its error, in its log, and in the store under hcomm/report/<rank>,
// where `hcomm run` finds and prints it.
package diag

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/store"
)

// Store keys of the dump protocol.
const (
	DumpSeqKey = "hcomm/dumpseq" // counter of dump requests
)

// DumpKey is the key whose setting asks every process for dump k.
func DumpKey(k int64) string { return "hcomm/dump/" + strconv.FormatInt(k, 10) }

// StateKey is where the process of world rank w answers dump k.
func StateKey(k int64, w int) string { return fmt.Sprintf("hcomm/state/%d/%d", k, w) }

// ReportKey is where world rank w leaves its culprit report.
func ReportKey(w int) string { return "hcomm/report/" + strconv.Itoa(w) }

// ReportWait bounds how long a timed-out rank collects the others' states.
const ReportWait = 1500 * time.Millisecond

// CommState is one communicator's state as a process publishes it.
type CommState struct {
	Comm string `json:"comm"`
	Rank int    `json:"rank"`
	trace.Snapshot
	// Paths describes the communicator's network paths to its peers,
	// a line each (tcp.PathStats.String), as its Source's Paths gave them.
	Paths []string `json:"paths,omitempty"`
}

// ProcState is what a process publishes on a dump request.
type ProcState struct {
	World int         `json:"world"`
	PID   int         `json:"pid"`
	Comms []CommState `json:"comms"`
}

// Source is a communicator as diagnostics see it.
type Source interface {
	ID() string
	Rank() int
	Snapshot() trace.Snapshot
	// Paths describes the communicator's network paths, a line each (nil:
	// none).
	Paths() []string
}

// Watcher answers dump requests for the communicators of one process.
type Watcher struct {
	st    store.Store
	world int

	mu    sync.Mutex
	comms []Source

	cancel context.CancelFunc
	done   chan struct{}
}

// NewWatcher starts answering dump requests through st for the process of
// world rank world.
func NewWatcher(st store.Store, world int) *Watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Watcher{st: st, world: world, cancel: cancel, done: make(chan struct{})}
	go w.loop(ctx)
	return w
}

// Add makes s part of this process's answers.
func (w *Watcher) Add(s Source) {
	w.mu.Lock()
	w.comms = append(w.comms, s)
	w.mu.Unlock()
}

// Remove takes s out of this process's answers.
func (w *Watcher) Remove(s Source) {
	w.mu.Lock()
	w.comms = slices.DeleteFunc(w.comms, func(x Source) bool { return x == s })
	w.mu.Unlock()
}

// Stop stops the watcher once its store wait returns (close the store
// first, or it waits for the next request).
func (w *Watcher) Stop() {
	w.cancel()
	<-w.done
}

// State is what this process answers now.
func (w *Watcher) State() ProcState {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := ProcState{World: w.world, PID: os.Getpid()}
	for _, c := range w.comms {
		ps.Comms = append(ps.Comms, CommState{Comm: c.ID(), Rank: c.Rank(), Snapshot: c.Snapshot(), Paths: c.Paths()})
	}
	return ps
}

// loop answers dump request k (DumpKey(k)) by publishing this process's
// state under StateKey(k, world).
func (w *Watcher) loop(ctx context.Context) {
	defer close(w.done)
	for k := int64(1); ; k++ {
		if _, err := w.st.Get(ctx, DumpKey(k)); err != nil {
			return
		}
		b, _ := json.Marshal(w.State())
		if err := w.st.Set(ctx, StateKey(k, w.world), b); err != nil {
			return
		}
	}
}

// Report asks every process of the job for its state and explains who
// the ranks of communicator id (of which this process is rank, with the
// world ranks members) wait for in operation what (as "op #42
// AllReduce(…)"), using explain on the ranks' states (Explain for a
// collective, ExplainP2P for Send and Recv). It logs the report and leaves
// it in the store for the launcher.
func Report(st store.Store, log *slog.Logger, id string, rank int, members []int, what string, explain func([]*CommState) string) string {
	states, err := States(st, id, members, ReportWait)
	if err != nil {
		return "no culprit report: the store is unreachable: " + err.Error()
	}
	rep := explain(states)
	log.Error("hcomm: operation timed out", "comm", id, "rank", rank, "op", what, "report", rep)
	wctx, wcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer wcancel()
	st.Set(wctx, ReportKey(members[rank]), []byte(fmt.Sprintf("%s timed out on rank %d: %s", what, rank, rep)))
	return rep
}

// States asks every process of the job for its state and returns the
// state of communicator id at each of its ranks (world ranks members),
// nil for a rank that did not answer within wait.
func States(st store.Store, id string, members []int, wait time.Duration) ([]*CommState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	k, err := st.Add(ctx, DumpSeqKey, 1)
	if err != nil {
		return nil, err
	}
	if err := st.Set(ctx, DumpKey(k), []byte{1}); err != nil {
		return nil, err
	}
	states := make([]*CommState, len(members))
	var wg sync.WaitGroup
	for r := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := st.Get(ctx, StateKey(k, members[r]))
			var ps ProcState
			if err != nil || len(v) > 1<<20 || json.Unmarshal(v, &ps) != nil {
				return
			}
			for i := range ps.Comms {
				if ps.Comms[i].Comm == id {
					states[r] = &ps.Comms[i]
				}
			}
		}()
	}
	wg.Wait()
	return states, nil
}

// Explain groups the ranks by where they are relative to operation seq:
//
//	ranks 0-2 wait in op #42 AllReduce(float32, 262144, sum); rank 3 last completed op #41 and has not entered #42
//
// states[r] is rank r's state, nil if it did not answer.
func Explain(seq uint64, call string, states []*CommState) string {
	var g Groups
	add := g.Add
	for r, s := range states {
		switch {
		case s == nil:
			add("did not answer (stopped, hung, or cut off from the store)", r)
		case s.Entered == seq && s.State == "running":
			add(fmt.Sprintf("wait in op #%d %s", seq, call), r)
		case s.Entered == seq:
			add(fmt.Sprintf("%s op #%d %s", s.State, seq, call), r)
		case s.Entered < seq:
			add(fmt.Sprintf("last completed op #%d and has not entered #%d", s.Completed, seq), r)
		default:
			add(fmt.Sprintf("moved on to op #%d %s (%s)", s.Entered, s.Call, s.State), r)
		}
	}
	return g.String()
}

// Groups collects ranks under what they are doing, in order of first
// appearance, and renders them as Explain does: "ranks 0-2 wait in …;
// rank 3 last completed …".
type Groups struct {
	list []rankGroup
}

type rankGroup struct {
	what  string
	ranks []int
}

// Add puts rank r (ranks ascending) under what.
func (g *Groups) Add(what string, r int) {
	for i := range g.list {
		if g.list[i].what == what {
			g.list[i].ranks = append(g.list[i].ranks, r)
			return
		}
	}
	g.list = append(g.list, rankGroup{what, []int{r}})
}

// String renders the groups, one "ranks … what" part each, joined by "; "
// ("rank 3 waits", "ranks 0-2 wait").
func (g *Groups) String() string {
	parts := make([]string, len(g.list))
	for i, grp := range g.list {
		verb := grp.what
		if len(grp.ranks) == 1 {
			verb = strings.Replace(verb, "wait in", "waits in", 1)
		}
		parts[i] = RankList(grp.ranks) + " " + verb
	}
	return strings.Join(parts, "; ")
}

// ExplainP2P says where the peer of a timed-out Send or Recv is:
//
//	rank 1 (the peer) waits in Recv(float32, 4, tag 7) from rank 0
//	rank 1 (the peer) last completed op #41 and waits in op #42 AllReduce(float32, 4, sum)
//
// states[peer] is the peer's state, nil if it did not answer.
func ExplainP2P(peer int, states []*CommState) string {
	who := fmt.Sprintf("rank %d (the peer)", peer)
	var s *CommState
	if peer >= 0 && peer < len(states) {
		s = states[peer]
	}
	switch {
	case s == nil:
		return who + " did not answer (stopped, hung, or cut off from the store)"
	case len(s.P2P) > 0:
		return who + " waits in " + strings.Join(s.P2P, " and in ")
	case s.Entered == 0:
		return who + " has run no collective and is in no Send or Recv"
	case s.State == "running":
		return fmt.Sprintf("%s last completed op #%d and waits in op #%d %s", who, s.Completed, s.Entered, s.Call)
	case s.Call == "":
		return fmt.Sprintf("%s last completed op #%d and is in no Send or Recv", who, s.Completed)
	}
	return fmt.Sprintf("%s is past op #%d %s (%s) and is in no Send or Recv", who, s.Entered, s.Call, s.State)
}

// RankList renders ranks (ascending) compactly: "rank 3", "ranks 0-2, 5".
func RankList(rs []int) string {
	if len(rs) == 1 {
		return "rank " + strconv.Itoa(rs[0])
	}
	var b strings.Builder
	b.WriteString("ranks ")
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(rs[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(rs[j]))
		}
		i = j + 1
	}
	return b.String()
}

package hcomm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/store"
)

// A stuck job explains itself. Every process of a multi-process job runs a
// watcher that waits on the store for a dump request. A rank whose
// operation times out asks for a dump; every process that can still reach
// the store answers with the state of its communicators (the flight
// recorder's last operation entered and completed); the rank then says who
// everyone is waiting for, in its error, in its log, and in the store under
// hcomm/report/<rank>, where `hcomm run` finds and prints it.

// reportWait bounds how long a timed-out rank collects the others' states.
const reportWait = 1500 * time.Millisecond

// commState is one communicator's state as a process publishes it.
type commState struct {
	Comm string `json:"comm"`
	Rank int    `json:"rank"`
	trace.Snapshot
}

// procState is what a process publishes on a dump request.
type procState struct {
	World int         `json:"world"`
	PID   int         `json:"pid"`
	Comms []commState `json:"comms"`
}

// watcher answers dump requests for the communicators of one job.
type watcher struct {
	st    store.Store
	world int

	mu    sync.Mutex
	comms []*Comm

	cancel context.CancelFunc
	done   chan struct{}
}

func newWatcher(st store.Store, world int) *watcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watcher{st: st, world: world, cancel: cancel, done: make(chan struct{})}
	go w.loop(ctx)
	return w
}

func (w *watcher) add(c *Comm) {
	w.mu.Lock()
	w.comms = append(w.comms, c)
	w.mu.Unlock()
}

func (w *watcher) remove(c *Comm) {
	w.mu.Lock()
	w.comms = slices.DeleteFunc(w.comms, func(x *Comm) bool { return x == c })
	w.mu.Unlock()
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

func (w *watcher) state() procState {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := procState{World: w.world, PID: os.Getpid()}
	for _, c := range w.comms {
		ps.Comms = append(ps.Comms, commState{Comm: c.id, Rank: c.rank, Snapshot: c.rec.Snapshot()})
	}
	return ps
}

// loop answers dump request k (key hcomm/dump/<k>) by publishing this
// process's state under hcomm/state/<k>/<world rank>.
func (w *watcher) loop(ctx context.Context) {
	defer close(w.done)
	for k := 1; ; k++ {
		if _, err := w.st.Get(ctx, "hcomm/dump/"+strconv.Itoa(k)); err != nil {
			return
		}
		b, _ := json.Marshal(w.state())
		if err := w.st.Set(ctx, fmt.Sprintf("hcomm/state/%d/%d", k, w.world), b); err != nil {
			return
		}
	}
}

// culprit asks every process of the job for its state and explains who
// the ranks of c are waiting for in operation seq. It returns "" when the
// communicator has no store to ask.
func (c *Comm) culprit(seq uint64, call string) string {
	sb, ok := c.boot.(*storeBoot)
	if !ok || sb.watch == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), reportWait)
	defer cancel()
	k, err := sb.st.Add(ctx, "hcomm/dumpseq", 1)
	if err != nil {
		return "no culprit report: the store is unreachable: " + err.Error()
	}
	if err := sb.st.Set(ctx, fmt.Sprintf("hcomm/dump/%d", k), []byte{1}); err != nil {
		return "no culprit report: the store is unreachable: " + err.Error()
	}
	states := make([]*commState, c.size)
	var wg sync.WaitGroup
	for r := 0; r < c.size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := sb.st.Get(ctx, fmt.Sprintf("hcomm/state/%d/%d", k, c.members[r]))
			var ps procState
			if err != nil || len(v) > 1<<20 || json.Unmarshal(v, &ps) != nil {
				return
			}
			for i := range ps.Comms {
				if ps.Comms[i].Comm == c.id {
					states[r] = &ps.Comms[i]
				}
			}
		}()
	}
	wg.Wait()
	rep := explain(seq, call, states)
	sb.set.log.Error("hcomm: operation timed out", "comm", c.id, "rank", c.rank, "op", seq, "report", rep)
	wctx, wcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer wcancel()
	sb.st.Set(wctx, "hcomm/report/"+strconv.Itoa(c.members[c.rank]),
		[]byte(fmt.Sprintf("op #%d %s timed out on rank %d: %s", seq, call, c.rank, rep)))
	return rep
}

// explain groups the ranks by where they are relative to operation seq:
//
//	ranks 0-2 wait in op #42 AllReduce(float32, 262144, sum); rank 3 last completed op #41 and has not entered #42
func explain(seq uint64, call string, states []*commState) string {
	type group struct {
		what  string
		ranks []int
	}
	var groups []*group
	add := func(what string, r int) {
		for _, g := range groups {
			if g.what == what {
				g.ranks = append(g.ranks, r)
				return
			}
		}
		groups = append(groups, &group{what, []int{r}})
	}
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
	parts := make([]string, len(groups))
	for i, g := range groups {
		verb := g.what
		if len(g.ranks) == 1 {
			// "rank 3 waits", "ranks 0-2 wait"
			verb = strings.Replace(verb, "wait in", "waits in", 1)
		}
		parts[i] = rankList(g.ranks) + " " + verb
	}
	return strings.Join(parts, "; ")
}

// rankList renders ranks compactly: "rank 3", "ranks 0-2, 5".
func rankList(rs []int) string {
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

// reportFor returns the culprit report for the collective cur, asking the
// job once per operation (the executor's error hook and the caller both
// describe the same timeout).
func (c *Comm) reportFor(cur *current) string {
	if cur.fp == nil {
		return ""
	}
	c.repMu.Lock()
	defer c.repMu.Unlock()
	if c.repSeq != cur.fp.Seq {
		e := trace.Entry{Name: cur.name, FP: *cur.fp}
		c.repSeq, c.report = cur.fp.Seq, c.culprit(cur.fp.Seq, e.Call())
	}
	return c.report
}

// failedKey is where rank r of communicator id tells why it failed.
func failedKey(id string, world int) string {
	return "hcomm/failed/" + id + "/" + strconv.Itoa(world)
}

// publishFailure tells the job, through the store, why this communicator
// failed, so that a peer that merely sees the connection drop can tell its
// user the real cause. It does not wait.
func (c *Comm) publishFailure(err error) {
	sb, ok := c.boot.(*storeBoot)
	if !ok || sb.watch == nil {
		return
	}
	text := err.Error()
	sb.notes.Add(1)
	go func() {
		defer sb.notes.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		sb.st.Set(ctx, failedKey(c.id, c.members[c.rank]), []byte(text))
	}()
}

// lostNoteWait bounds how long a rank that lost a peer waits for that
// peer's own account of its failure.
const lostNoteWait = 300 * time.Millisecond

// whyLost enriches "lost rank p" with what rank p published about its own
// failure, if it is alive enough to have done so.
func (c *Comm) whyLost(err error) error {
	var pe *errs.PeerError
	sb, ok := c.boot.(*storeBoot)
	if !ok || sb.watch == nil || !errors.As(err, &pe) || pe.Kind != errs.ErrPeerLost || pe.Peer < 0 || pe.Peer >= c.size {
		return err
	}
	c.repMu.Lock()
	defer c.repMu.Unlock()
	if c.lostErr == err {
		return c.lostNote
	}
	ctx, cancel := context.WithTimeout(context.Background(), lostNoteWait)
	defer cancel()
	out := err
	if v, gerr := sb.st.Get(ctx, failedKey(c.id, c.members[pe.Peer])); gerr == nil && len(v) <= 4096 {
		out = &errs.PeerError{Peer: pe.Peer, Kind: errs.ErrAborted,
			Cause: fmt.Errorf("%s (its connection dropped after it reported: %s)", pe.Error(), v)}
	}
	c.lostErr, c.lostNote = err, out
	return out
}

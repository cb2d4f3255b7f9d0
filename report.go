package hcomm

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hcomm-go/hcomm/internal/boot"
	"github.com/hcomm-go/hcomm/internal/culprit"
	"github.com/hcomm-go/hcomm/internal/notice"
	"github.com/hcomm-go/hcomm/internal/trace"
)

// A stuck job explains itself (internal/diag): a rank whose operation times
// out asks every process of the job, through the store, where its
// communicators are, and says who everyone waits for.

// commDiag is a communicator as diagnostics see it.
type commDiag Comm

func (d *commDiag) ID() string                   { return d.id }
func (d *commDiag) Rank() int                    { return d.rank }
func (d *commDiag) Snapshot() trace.Snapshot     { return d.path.Rec.Snapshot() }
func (d *commDiag) WriteState(w io.Writer) error { return (*Comm)(d).WriteState(w) }

// Paths describes the communicator's network paths for dump answers
// (hcomm topo -live).
func (d *commDiag) Paths() []string {
	var lines []string
	for _, s := range boot.NetPaths(d.path.T, d.size) {
		lines = append(lines, s.String())
	}
	return lines
}

// stallView is a communicator as its stall check (internal/stall) sees it.
type stallView Comm

func (v *stallView) Rank() int     { return v.rank }
func (v *stallView) Healthy() bool { return v.path.State.Load() == stateOK }

func (v *stallView) Mismatch(seq uint64, name string, peer int, err error) {
	(*Comm)(v).fail(&OpError{Op: name, Rank: v.rank, Peer: peer, Seq: seq, Err: err})
}

// Late is told by each stall check which ranks had not entered collective
// seq yet; persistent stragglers get a warning (logSlow).
func (v *stallView) Late(seq uint64, name string, late []int) {
	c := (*Comm)(v)
	if slow := c.slow.Note(c.rank, c.size, seq, late, time.Now()); slow != nil {
		c.logSlow(seq, name, slow)
	}
	if f := testLateNoted.Load(); f != nil {
		(*f)(c, seq, late)
	}
}

// testLateNoted, set by tests, is told of every Late. It is atomic: a stall
// check of another test's communicator may still fire while a test sets it.
var testLateNoted atomic.Pointer[func(c *Comm, seq uint64, late []int)]

// CallsOf returns each rank's call of collective seq: from the peers'
// flight recorders under NewLocal, through the dump protocol in a job.
func (v *stallView) CallsOf(seq uint64) []string {
	if v.group != nil {
		return v.group.CallsOf(seq)
	}
	return v.job.CallsOf(v.id, v.members, v.size, seq)
}

// reportFor returns the culprit report for the collective cur, asking the
// job once per operation (boot.Job.ReportCall). It is "" without a job to
// ask.
func (c *Comm) reportFor(cur *current) string {
	if cur.FP == nil || c.job == nil {
		return ""
	}
	return c.job.ReportCall(&c.reports, c.id, c.rank, c.members, cur.Name, cur.FP, cur.Peer)
}

// publishFailure tells the job, through the store, why this communicator
// failed (see internal/notice): this rank's note, and the communicator's
// notice if this rank is the first to fail. It returns once they are
// stored (or after a bounded wait), so that the news outlives a process
// that exits right after its error. A rank publishes once.
func (c *Comm) publishFailure(err error) {
	if c.job == nil || !c.published.CompareAndSwap(false, true) {
		return
	}
	c.job.PublishFailure(c.id, c.members[c.rank], notice.Note{From: c.rank, Lost: culprit.Lost(err, c.size), Text: err.Error()})
}

// watchNotice waits for the communicator's failure notice and, when
// another rank published it, fails the communicator with its root cause:
// calls blocked on any peer, or on a connection that will never come,
// return at once.
func (c *Comm) watchNotice(ctx context.Context) {
	n, err := c.job.WatchNotice(ctx, c.id, c.size)
	if err != nil || n.From == c.rank {
		return
	}
	perr := c.culprit.Noticed(n)
	// relayed: a later call fails with ErrMismatch if the notice's reason
	// was one, as when the abort comes through the transport.
	c.path.State.Fail(culprit.Relayed(perr))
	c.path.T.Abort(perr)
}

// WriteState writes the communicator's flight recorder — its last
// operations, with sequence numbers, calls, states and timings — to w.
func (c *Comm) WriteState(w io.Writer) error {
	_, err := fmt.Fprintf(w, "hcomm: communicator %s rank %d of %d, state %s\n%s",
		c.id, c.rank, c.size, &c.path.State, c.path.Rec.Format())
	for _, p := range boot.NetPaths(c.path.T, c.size) {
		if err == nil {
			_, err = fmt.Fprintf(w, "  tcp %v\n", p)
		}
	}
	return err
}

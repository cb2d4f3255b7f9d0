package hcomm

import (
	"errors"
	"fmt"
	"io"

	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// A stuck job explains itself (internal/diag): a rank whose operation times
// out asks every process of the job, through the store, where its
// communicators are, and says who everyone waits for.

// commDiag is a communicator as diagnostics see it.
type commDiag Comm

func (d *commDiag) ID() string                   { return d.id }
func (d *commDiag) Rank() int                    { return d.rank }
func (d *commDiag) Snapshot() trace.Snapshot     { return d.rec.Snapshot() }
func (d *commDiag) WriteState(w io.Writer) error { return (*Comm)(d).WriteState(w) }

// reportFor returns the culprit report for the collective cur, asking the
// job once per operation (the executor's error hook and the caller both
// describe the same timeout). It is "" without a job to ask.
func (c *Comm) reportFor(cur *current) string {
	if cur.fp == nil || c.job == nil {
		return ""
	}
	e := trace.Entry{Name: cur.name, FP: *cur.fp}
	call, seq := e.Call(), cur.fp.Seq
	if cur.fp.Coll == wire.CollSendRecv {
		peer := cur.peer
		return c.job.Report(c.id, c.rank, c.members, fmt.Sprintf("%s #%d with rank %d", call, seq, peer),
			func(s []*diag.CommState) string { return diag.ExplainP2P(peer, s) })
	}
	c.repMu.Lock()
	defer c.repMu.Unlock()
	if c.repSeq != seq {
		c.repSeq, c.report = seq, c.job.Report(c.id, c.rank, c.members, fmt.Sprintf("op #%d %s", seq, call),
			func(s []*diag.CommState) string { return diag.Explain(seq, call, s) })
	}
	return c.report
}

// publishFailure tells the job why this communicator failed. It does not
// wait.
func (c *Comm) publishFailure(err error) {
	if c.job != nil {
		c.job.PublishFailure(c.id, c.members[c.rank], err.Error())
	}
}

// whyLost enriches "lost rank p" with what rank p published about its own
// failure, if it is alive enough to have done so.
func (c *Comm) whyLost(err error) error {
	var pe *errs.PeerError
	if c.job == nil || !errors.As(err, &pe) || pe.Kind != errs.ErrPeerLost || pe.Peer < 0 || pe.Peer >= c.size {
		return err
	}
	c.repMu.Lock()
	defer c.repMu.Unlock()
	if c.lostErr == err {
		return c.lostNote
	}
	out := err
	if note, ok := c.job.FailureNote(c.id, c.members[pe.Peer]); ok {
		out = &errs.PeerError{Peer: pe.Peer, Kind: errs.ErrAborted,
			Cause: fmt.Errorf("%s (its connection dropped after it reported: %s)", pe.Error(), note)}
	}
	c.lostErr, c.lostNote = err, out
	return out
}

// WriteState writes the communicator's flight recorder — its last
// operations, with sequence numbers, calls, states and timings — to w.
func (c *Comm) WriteState(w io.Writer) error {
	_, err := fmt.Fprintf(w, "hcomm: communicator %s rank %d of %d, state %s\n%s",
		c.id, c.rank, c.size, c.stateName(), c.rec.Format())
	return err
}

func (c *Comm) stateName() string {
	switch c.state.Load() {
	case stateOK:
		return "ok"
	case stateClosed:
		return "closed"
	}
	return "failed"
}

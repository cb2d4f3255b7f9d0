package boot

import (
	"fmt"
	"sync"

	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/stall"
	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Reports holds a communicator's last culprit report, so that the job is
// asked once per collective: the executor's error hook and the caller
// both describe the same timeout.
type Reports struct {
	mu   sync.Mutex
	seq  uint64 // the collective the report is about
	text string
}

// ReportCall returns the culprit report (Report) for the call named name
// with fingerprint fp of communicator id, in which this process is rank
// and members are the world ranks; peer is a Send's or Recv's peer. A
// collective's report is made once (r).
func (j *Job) ReportCall(r *Reports, id string, rank int, members []int, name string, fp *wire.Fingerprint, peer int) string {
	e := trace.Entry{Name: name, FP: *fp}
	call, seq := e.Call(), fp.Seq
	if fp.Coll == wire.CollSendRecv {
		return j.Report(id, rank, members, fmt.Sprintf("%s #%d with rank %d", call, seq, peer),
			func(s []*diag.CommState) string { return diag.ExplainP2P(peer, s) })
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seq != seq {
		r.seq, r.text = seq, j.Report(id, rank, members, fmt.Sprintf("op #%d %s", seq, call),
			func(s []*diag.CommState) string { return diag.Explain(seq, call, s) })
	}
	return r.text
}

// CallsOf returns each of size ranks' call of collective seq of
// communicator id (members: their world ranks), read through the dump
// protocol's states for the stall check ("" where unknown; all "" without
// a job).
func (j *Job) CallsOf(id string, members []int, size int, seq uint64) []string {
	calls := make([]string, size)
	if j != nil {
		if states, err := j.States(id, members, stall.StatesWait); err == nil {
			stall.CallsFromStates(states, seq, calls)
		}
	}
	return calls
}

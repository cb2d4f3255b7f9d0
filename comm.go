package hcomm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/hcomm-go/hcomm/internal/boot"
	"github.com/hcomm-go/hcomm/internal/callpath"
	"github.com/hcomm-go/hcomm/internal/culprit"
	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/exec"
	"github.com/hcomm-go/hcomm/internal/lifecycle"
	"github.com/hcomm-go/hcomm/internal/opctx"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/rma"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/split"
	"github.com/hcomm-go/hcomm/internal/stall"
	"github.com/hcomm-go/hcomm/internal/stream"
	"github.com/hcomm-go/hcomm/internal/topo"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/transport/local"
	"github.com/hcomm-go/hcomm/internal/wire"
	"github.com/hcomm-go/hcomm/internal/zcopy"
)

// Comm is a communicator: one rank's handle on a group of ranks that run
// collectives together.
//
// Collectives on one communicator must be issued in the same order on every
// rank. A Comm is safe for concurrent use by several goroutines (their calls
// are serialized), but independent concurrent streams of collectives need
// separate communicators (see Split). Send and Recv to different peers may
// run concurrently with each other, but not concurrently with a collective
// on the same communicator.
//
// When an operation fails after communication has started (a timeout, a
// lost or aborted peer, a mismatch, a cancelled ctx), the communicator is
// unusable afterwards: later calls fail with ErrAborted wrapping the first
// failure, and the peers are told so they fail too instead of waiting.
// Argument errors (ErrInvalidArgument) are found before anything is sent
// and leave the communicator usable.
type Comm struct {
	rank, size int
	id         string // identity, unique among the communicators of a job
	set        options
	model      plan.Model
	job        *boot.Job     // the job's store and transports; nil under NewLocal
	fabric     *local.Fabric // NewLocal's in-process fabric; nil in a job
	ownsJob    bool          // Close closes job (the world communicator)
	trace      *traceFile    // HCOMM_TRACE's file, closed by Close (the world communicator)

	members   []int          // the world rank of each rank (multi-process jobs)
	reports   boot.Reports   // the last culprit report, asked once per operation
	culprit   culprit.Finder // the root cause of a peer's failure, with the job's notes
	published atomic.Bool    // this rank published its failure note
	detach    func()         // ends the job's watch of this communicator (dumps, notice); nil under NewLocal

	// path runs the calls: transport, executor, planner, state, flight
	// recorder, stall check, registered memory (internal/callpath).
	path      callpath.Path
	splits    int                  // guarded by path.Mu
	streamSet stream.Set[collArgs] // made by NewStream, closed by Close
	windows   rma.Set              // open windows, released by Close
	eng       zcopy.Engine         // the copy engine, started when it pays

	group *stall.Group // NewLocal's communicators, for the stall check; nil in a job
	slow  stall.Slow   // the peers the stall check found late, for the slow-peer warning
}

// current describes the collective being run, for error reports.
type current = callpath.Current

const (
	stateOK     = lifecycle.OK
	stateClosed = lifecycle.Closed
	stateFailed = lifecycle.Failed
)

// NewLocal returns n communicating ranks inside this process, each a *Comm
// to be driven by its own goroutine, as if they were n processes. It is for
// tests and for single-process programs; messages are copied between the
// ranks' buffers exactly as between processes.
func NewLocal(ctx context.Context, n int, cfg *Config) ([]*Comm, error) {
	if n < 1 {
		return nil, &OpError{Op: "NewLocal", Peer: -1, Err: invalid("n = %d, want at least 1", n)}
	}
	_, set, err := resolve(cfg)
	if err != nil {
		return nil, &OpError{Op: "NewLocal", Peer: -1, Err: err}
	}
	f := local.NewFabric(n)
	comms := make([]*Comm, n)
	g := stall.NewGroup(n)
	for r := range comms {
		comms[r] = newComm(r, n, "local", set, f.Endpoint(r), nil, f, plan.MemoryModel)
		comms[r].group = g
		g.Set(r, &comms[r].path.Rec)
	}
	return comms, nil
}

func newComm(rank, size int, id string, set options, t transport.Transport, job *boot.Job, f *local.Fabric, m plan.Model) *Comm {
	m.Chunk = set.chunk
	c := &Comm{rank: rank, size: size, id: id, set: set, job: job, fabric: f, model: m}
	p := &c.path
	p.Rank, p.Size, p.ID, p.Ex, p.Pl = rank, size, id, exec.New(t, set.chunk), plan.New(rank, size, m, set.Overrides)
	p.Set, p.Set.Debug = set.Settings, set.Log.Enabled(context.Background(), slog.LevelDebug)
	p.Err = func(op string, peer int, err error) error { return &OpError{Op: op, Rank: rank, Peer: peer, Err: err} }
	p.Fail = func(cur *current, err error) error { return c.runErr(cur, err) }
	c.observeWith(set.observer)
	// The first failing op of a collective poisons the communicator at
	// once, which also unblocks the collective's other ops and the peers.
	p.Ex.OnError = func(err error) { c.fail(c.opErr(&p.Cur, err)) }
	p.Ex.Timed = set.observer != nil // OpEvent.Wait
	p.Ex.Pin = topo.Pinner(set.pollCPUs, set.Log)
	p.Stall.Init((*stallView)(c), &p.Rec)
	p.Init(t)
	c.members = make([]int, size)
	for i := range c.members {
		c.members[i] = i
	}
	c.culprit = culprit.Finder{ID: c.id, Rank: rank, Members: c.members}
	if job != nil {
		c.culprit.Notes = job
		c.detach = job.Attach((*commDiag)(c), c.watchNotice)
	}
	diag.RegisterDump(diag.Signal(set.dumpSignal), (*commDiag)(c))
	track(c)
	return c
}

// Rank returns this rank's index in [0, Size()).
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.size }

// usable returns nil if the communicator can run operations.
func (c *Comm) usable() error { return c.path.Usable() }

// fail marks the communicator unusable after err and tells the peers.
// Once closed it does nothing: an op that fails because Close closed the
// transport is not a failure (see runErr).
func (c *Comm) fail(err error) {
	if c.path.State.Load() == stateClosed {
		return
	}
	c.path.State.Fail(err)
	c.path.T.Abort(err)
	c.publishFailure(err)
}

// Abort makes the communicator unusable at once: pending operations and all
// later ones fail with ErrAborted, and peers waiting on this rank fail
// instead of hanging, including peers it never connected to (through the
// store's failure notice). It waits for nothing but the hand-over of the
// abort to the network and the store (at most 200 ms and 500 ms). cause
// may be nil. After Close it does nothing: peers see a closed rank as
// lost.
func (c *Comm) Abort(cause error) {
	if c.path.State.Load() == stateClosed {
		return
	}
	if cause == nil {
		cause = errors.New("Abort called")
	}
	c.path.State.Abort(cause)
	c.path.T.Abort(cause)
	c.publishFailure(cause)
}

// Close releases the communicator, closes the streams made by its
// NewStream and releases its windows still open. It does not wait for peers; operations still running fail
// with ErrClosed, and peers waiting on this rank see it as lost. Close is
// idempotent, and Close on a nil *Comm does nothing, so that
// `defer sub.Close()` is safe after a Split that made this rank a member
// of nothing.
func (c *Comm) Close() error {
	if c == nil {
		return nil
	}
	if !c.path.State.Close() {
		return nil
	}
	c.streamSet.Close() // the streams made by NewStream
	c.windows.Close()
	c.path.Stop()
	if c.group != nil {
		c.group.Leave(c.rank)
	}
	open.Remove(c)
	err := c.path.T.Close()
	c.path.Mu.Lock() // pending collectives return promptly once the transport is closed
	c.path.Ex.Close()
	c.path.Mu.Unlock()
	c.path.Rec.Stop() // the flight recorder's tick
	c.closeBuffers()
	if c.detach != nil {
		c.detach()
	}
	diag.UnregisterDump((*commDiag)(c))
	if c.ownsJob {
		c.job.Close()
	}
	c.trace.close()
	return err
}

// withTimeout bounds ctx by the configured timeout.
func (c *Comm) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.set.Timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.set.Timeout)
}

// opErr turns an error from running an operation into an *OpError.
func (c *Comm) opErr(cur *current, err error) *OpError {
	switch {
	case c.path.State.Load() == stateClosed:
		err = ErrClosed
	case peerOf(err) < 0 && (errors.Is(err, context.DeadlineExceeded) || cur.Ctx.Err() == context.DeadlineExceeded):
		te := &timeoutError{}
		if opctx.TimeoutFired(c.set.Timeout, cur.Parent, cur.Ctx) {
			te.After = c.set.Timeout
		}
		// Before the peers are told, find out who everybody waits for,
		// so that the report travels with the failure.
		te.Report = c.reportFor(cur)
		err = te
	case errors.Is(err, errs.ErrAborted) && c.path.State.Load() == stateFailed:
		// An abort after this communicator failed (Abort, an earlier
		// failure, a peer's notice) is its consequence: a peer relaying
		// this rank's own abort back must not be blamed for it. A
		// mismatch keeps its kind (culprit.Relayed).
		err = culprit.Relayed(c.usable())
	default:
		err = c.culprit.Cause(err)
	}
	peer := peerOf(err)
	if peer < 0 && cur.FP != nil && cur.FP.Coll == wire.CollSendRecv && errors.Is(err, ErrTimeout) {
		peer = cur.Peer // a Send or Recv timed out waiting for this peer
	}
	return &OpError{Op: cur.Name, Rank: c.rank, Peer: peer, Seq: cur.Seq, Err: err}
}

// runErr reports a failed operation and poisons the communicator.
func (c *Comm) runErr(cur *current, err error) *OpError {
	oe := c.opErr(cur, err)
	switch c.path.State.Load() {
	case stateOK:
		c.fail(oe)
	case stateClosed:
		// Closing is not a failure: the call ends with ErrClosed and
		// publishes nothing, so peers waiting on this rank see it as
		// lost (ErrPeerLost), as Close and ErrPeerLost say, not as a
		// rank that aborted.
	default:
		// Failed by another rank's notice, or by an earlier op of this
		// one: leave this rank's note before the caller can exit.
		c.publishFailure(oe)
	}
	return oe
}

// Split partitions the communicator, as MPI_Comm_split does: every rank
// calls it; ranks passing the same color form a new communicator, ranked by
// key (ties broken by rank in c). A rank passing a negative color takes part
// but joins nothing and gets (nil, nil); Close on that nil *Comm is a
// no-op, so `defer sub.Close()` needs no check.
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	pair := []int64{int64(color), int64(key)}
	all := make([]int64, 2*c.size)
	if err := AllGather(ctx, c, pair, all); err != nil {
		var oe *OpError
		if errors.As(err, &oe) {
			oe.Op = "Split"
		}
		return nil, err
	}
	c.path.Mu.Lock()
	c.splits++
	n := c.splits
	c.path.Mu.Unlock()
	parents, newRank := split.Members(all, color, c.rank)
	if parents == nil {
		return nil, nil
	}
	id := fmt.Sprintf("%s/split%d/color%d", c.id, n, color)
	t, f, err := c.connect(ctx, id, newRank, len(parents))
	if err != nil {
		return nil, &OpError{Op: "Split", Rank: c.rank, Peer: -1, Err: err}
	}
	model := c.model
	if c.path.Pl.OneHost(parents) {
		model = plan.MemoryModel // one host of the parent's layout: all shared memory
	}
	sub := newComm(newRank, len(parents), id, c.set, t, c.job, f, model)
	if err := sub.path.Pl.Inherit(c.path.Pl, parents); err != nil {
		sub.Close()
		return nil, &OpError{Op: "Split", Rank: c.rank, Peer: -1, Err: err}
	}
	for i, r := range parents {
		sub.members[i] = c.members[r]
	}
	if c.group != nil {
		sub.group = c.group.Sub(id, len(parents))
		sub.group.Set(newRank, &sub.path.Rec)
	}
	return sub, nil
}

// connect builds the transport of a communicator derived from c (Split,
// windows): through the job's store, or under NewLocal over a sub-fabric,
// which it also returns.
func (c *Comm) connect(ctx context.Context, id string, rank, size int) (transport.Transport, *local.Fabric, error) {
	if c.job != nil {
		t, err := c.job.Sub(ctx, id, rank, size)
		return t, nil, err
	}
	f, err := c.fabric.Sub(id, size)
	if err != nil {
		return nil, nil, err
	}
	return f.Endpoint(rank), f, nil
}

// Barrier returns once every rank has entered it.
func (c *Comm) Barrier(ctx context.Context) error {
	return c.run(ctx, &call{Name: "Barrier", Coll: sched.Barrier})
}

// Package callpath is the path of one call of a communicator, from its
// checked arguments to the executor and back: the program the planner
// picks, the sequence number and fingerprint, the flight recorder, the
// per-call deadline, the group path of small collectives (group.go), the
// zero-copy path on registered memory (zerocopy.go), the stall check,
// the DEBUG line and the observation of the call (observe.go), and Send
// and Recv (p2p.go). The root package's collectives reach it through
// Path.Run; what a failure becomes for the user (an *OpError, the
// communicator failed, the peers told) is the root's, through Path.Err
// and Path.Fail.
//
// The per-call path allocates nothing, and a small collective on the
// group path reads no clock unless it waits or is observed.
package callpath

import (
	"context"
	"log/slog"
	rtrace "runtime/trace"
	"sync"
	"time"

	"github.com/hcomm-go/hcomm/internal/argcheck"
	"github.com/hcomm-go/hcomm/internal/culprit"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/exec"
	"github.com/hcomm-go/hcomm/internal/lifecycle"
	"github.com/hcomm-go/hcomm/internal/opctx"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/stall"
	"github.com/hcomm-go/hcomm/internal/trace"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
	"github.com/hcomm-go/hcomm/internal/zcopy"
)

// Call is one collective call after argument checking. A uniform call
// (every rank the same count) names its collective, count, root and
// in-place-ness, and its program comes from the planner's cache without
// building a Spec; the V variants carry a full Spec.
type Call struct {
	Name string
	Coll sched.Coll
	argcheck.Call
}

// Current describes the call being run, for error reports.
type Current struct {
	Name        string
	Seq         uint64
	Parent, Ctx context.Context
	FP          *wire.Fingerprint
	Peer        int       // the peer of a Send or Recv
	Start       time.Time // when it started
}

// Settings are what the call path keeps of a communicator's settings.
type Settings struct {
	Timeout  time.Duration // 0: none
	ZeroCopy int           // the least bytes for the zero-copy path; <= 0: off
	// ZeroCopyFixed takes the zero-copy path for every candidate from
	// ZeroCopy on (an explicit HCOMM_ZERO_COPY size); else the ordinary
	// program runs where it is faster (zcopy.Ordinary).
	ZeroCopyFixed bool
	NoSlots       bool // HCOMM_SHM_SLOTS=0: no group calls
	Overrides     plan.Overrides
	Log           *slog.Logger
	Debug         bool // Log takes DEBUG records: each collective is logged
}

// Path is a communicator's call path: the state of the collective running
// (collectives are serialized by Mu) and of Sends and Recvs per peer.
type Path struct {
	Rank, Size int
	ID         string
	Set        Settings
	T          transport.Transport
	Ex         *exec.Executor
	Pl         *plan.Planner
	State      lifecycle.State // the communicator's: usable, failed, closed
	Rec        trace.Recorder  // the flight recorder
	Clock      trace.Clock     // times calls
	Stall      stall.Check     // compares calls across ranks when a collective stalls
	Reg        zcopy.Registry  // registered memory (Comm.Alloc)
	// ZeroCopyT, if set, is the zero-copy path's transport instead of T
	// (tests: one that corrupts a record); set and read under Mu.
	ZeroCopyT transport.Transport

	// Err turns an error found before a call starts (nil ctx, unusable
	// communicator, no program) into what the call returns; peer is -1
	// when none is named.
	Err func(op string, peer int, err error) error
	// Fail reports a failed call (and fails the communicator); it returns
	// what the call returns, never nil.
	Fail func(cur *Current, err error) error
	// Start and End, set when the communicator is observed, are told of
	// every collective (observe.go).
	Start, End func(*Op)

	Mu      sync.Mutex // serializes collectives
	Seq     uint64
	Cur     Current          // the collective running, guarded by Mu
	Memo    argcheck.Memo    // the last collective's checked shape (the root's do), guarded by Mu
	fp      wire.Fingerprint // its fingerprint
	octx    opctx.Ctx        // its deadline
	octxEnd func()
	grp     group      // small collectives as group calls of the transport
	zc      zcopy.Call // the zero-copy path's view of the current call
	zcPath  zcopy.Path
	op      Op        // the observed call's event
	peers   []p2pSlot // [2*peer] Send, [2*peer+1] Recv
}

// Init sets up p for a communicator of size ranks over t, with its
// settings, executor and planner already in p.
func (p *Path) Init(t transport.Transport) {
	p.T, p.Clock = t, trace.NewClock()
	p.octxEnd = p.octx.End
	p.peers = make([]p2pSlot, 2*p.Size)
	p.InitGroup(t)
}

// Stop stops the timers of the communicator's calls for good (its
// Close): the stall check's and every per-call deadline's, each of which
// would otherwise hold the communicator until it fires.
func (p *Path) Stop() {
	p.Stall.Stop()
	p.octx.Stop()
	for i := range p.peers {
		p.peers[i].ctx.Stop()
	}
}

// Usable returns nil if the communicator can run operations.
func (p *Path) Usable() error { return p.State.Err() }

// ErrNilCtx refuses a nil ctx before the call takes a sequence number, so
// the communicator stays usable and in step with its peers.
var ErrNilCtx = errs.Invalid("nil ctx")

// Run checks the communicator, stamps the call and executes it.
func (p *Path) Run(parent context.Context, k *Call) error {
	if parent == nil {
		return p.Err(k.Name, -1, ErrNilCtx)
	}
	if err := p.Usable(); err != nil {
		return p.Err(k.Name, culprit.Peer(err), err)
	}
	if k.DT == 0 {
		k.DT = reduce.Uint8
	}
	es := k.DT.Size()
	group := p.GroupFits(k)
	var prog *sched.Program
	var err error
	switch {
	case group:
	case k.Spec != nil:
		prog, err = p.Pl.Program(*k.Spec, es)
	default:
		prog, err = p.Pl.Uniform(k.Coll, k.Count, k.Root, k.InPlace, es)
	}
	if err != nil {
		return p.Err(k.Name, -1, errs.Invalid("%v", err))
	}
	p.Mu.Lock()
	defer p.Mu.Unlock()
	return p.runLocked(parent, k, prog, group)
}

// RunGroupLocked runs a checked call that fits the group path
// (GroupFits) under p.Mu, which the caller holds: the root's do checks
// the arguments and runs such a call in one lock section.
func (p *Path) RunGroupLocked(parent context.Context, k *Call) error {
	return p.runLocked(parent, k, nil, true)
}

// runLocked runs a checked call under p.Mu. It has no defers and one
// exit after the call starts, which keeps the per-call cost of a small
// collective down.
func (p *Path) runLocked(parent context.Context, k *Call, prog *sched.Program, group bool) error {
	if err := p.Usable(); err != nil {
		return p.Err(k.Name, culprit.Peer(err), err)
	}
	p.Seq++
	algo := GroupAlgo
	if !group {
		algo = prog.Algo
	}
	if p.Set.Debug {
		p.logOp(k, algo)
	}
	// Field by field: a composite literal is built on the stack and then
	// copied, and the copy's wide loads stall on its narrow stores.
	fp := &p.fp
	fp.Seq, fp.Coll, fp.DType, fp.Op, fp.Root, fp.Count = p.Seq, k.Coll, k.DT, k.Op, int32(k.Root), k.Digest
	// A group call reads no clock unless it waits (groupArm) or is
	// observed: the flight recorder stamps it later (Recorder.Record).
	var now time.Time
	observed := p.Start != nil || rtrace.IsEnabled()
	if !group || observed {
		now = p.Clock.Now()
	}
	cur := &p.Cur
	cur.Name, cur.Seq, cur.Parent, cur.Ctx, cur.FP, cur.Peer, cur.Start = k.Name, p.Seq, parent, parent, fp, 0, now
	// A group call that completes without waiting is recorded once, at its
	// end (Recorder.Record); one that waits is begun by groupArm.
	slot := -1
	if !group || observed {
		slot = p.Rec.Begin(k.Name, fp, now)
	}
	p.grp.slot = slot
	zc := !group && p.zeroCopy(k)
	var region *rtrace.Region
	if observed {
		region = p.observe(parent, k, prog, now, zc)
	}
	// end ends the call's deadline once a failure has been reported (the
	// report reads the deadline's state).
	var end func()
	var err error
	if group {
		// The deadline and the stall check are armed only if a wait
		// outlasts the transport's polling.
		err = p.grp.g.GroupRun(p.grp.arm, fp, k.In, k.Out)
		if p.grp.end != nil {
			p.Stall.End()
			end = p.groupDisarm
		}
	} else {
		var ctx context.Context
		ctx, end = p.boundCtx(parent, now)
		p.Cur.Ctx = ctx
		if p.Size > 1 {
			p.Stall.Begin(fp.Seq, now)
		}
		if zc {
			err = p.runZeroCopy(ctx, prog, fp, k)
			if observed {
				p.zcObserved()
			}
		} else {
			err = p.Ex.Run(ctx, prog, fp, k.DT, k.Op, k.In, k.Out)
		}
		if p.Size > 1 {
			p.Stall.End()
		}
	}
	var oe error // a nil interface when the call succeeded
	if err != nil {
		oe = p.Fail(&p.Cur, err)
	}
	if group {
		if p.grp.slot < 0 {
			p.Rec.Record(k.Name, fp, oe)
		} else {
			p.Rec.EndAt(p.grp.slot, oe, p.Clock.Now())
		}
	} else {
		p.Rec.End(slot, oe)
	}
	if observed {
		p.observeEnd(region, oe)
	}
	if end != nil {
		end()
	}
	if oe != nil {
		return oe
	}
	if k.Op == reduce.Avg && len(k.Avg) > 0 {
		reduce.DivN(k.DT, k.Avg, p.Size)
	}
	return nil
}

// boundCtx returns the context a collective runs under — parent bounded by
// the communicator's timeout — and a function to call when it ends. Calls
// are serialized by p.Mu, so one opctx.Ctx serves them all.
func (p *Path) boundCtx(parent context.Context, now time.Time) (context.Context, func()) {
	d := p.Set.Timeout
	if d <= 0 {
		return parent, func() {}
	}
	p.octx.Begin(parent, now, d)
	return &p.octx, p.octxEnd
}

// logOp writes a collective's DEBUG line: what runs, on how many bytes,
// and the algorithm the planner chose and why (plan.Overrides.Why). It is
// called only when Set.Debug is set (the level is checked once, when the
// communicator is made), so a communicator not logging at DEBUG pays one
// branch per collective. p.Mu is held.
func (p *Path) logOp(k *Call, algo string) {
	p.Set.Log.LogAttrs(context.Background(), slog.LevelDebug, "hcomm: op",
		slog.String("comm", p.ID), slog.Int("rank", p.Rank), slog.Uint64("seq", p.Seq),
		slog.String("op", k.Name), slog.String("dtype", k.DT.String()), slog.Int("bytes", max(len(k.In), len(k.Out))),
		slog.String("algo", algo), slog.String("why", p.Set.Overrides.Why(k.Coll, algo, algo == GroupAlgo)))
}

package hcomm

import (
	"context"

	"github.com/hcomm-go/hcomm/internal/argcheck"
	"github.com/hcomm-go/hcomm/internal/callpath"
	"github.com/hcomm-go/hcomm/internal/sched"
)

// args is one call as the user made it: the arguments of its Bytes form.
// The typed, Bytes and Async forms of every operation describe their call
// this way; argcheck is the one argument checker for all of them, and do
// the one way to run a described call.
type args = argcheck.Args

// errNilCtx refuses a nil ctx before the call takes a sequence number, so
// the communicator stays usable and in step with its peers.
var errNilCtx = callpath.ErrNilCtx

// do runs a described call.
func (c *Comm) do(ctx context.Context, a *args) error {
	if ctx == nil {
		return c.argErr(a.Name(), errNilCtx)
	}
	switch a.Coll {
	case sched.Barrier:
		return c.Barrier(ctx)
	case sched.SendRecv:
		return c.path.P2P(ctx, a.Name(), a.Buf(), a.DT, a.Root, a.Tag, !a.RecvSide)
	}
	k := call{Name: a.Name(), Coll: a.Coll}
	// The check is remembered per shape (argcheck.Memo), under the call
	// path's lock; a call that fits the group path then runs in the same
	// lock section.
	p := &c.path
	p.Mu.Lock()
	if err := p.Memo.Check(a, c.rank, c.size, &k.Call); err != nil {
		p.Mu.Unlock()
		return c.argErr(k.Name, err)
	}
	if !p.GroupFits(&k) {
		p.Mu.Unlock()
		return c.run(ctx, &k)
	}
	err := p.RunGroupLocked(ctx, &k)
	p.Mu.Unlock()
	if err == nil && c.set.checkResults {
		err = c.checkResults(ctx, &k)
	}
	return err
}

// checkArgs checks a described call's arguments without running it (the
// Async forms check at enqueue time).
func (c *Comm) checkArgs(a *args) error {
	var err error
	switch a.Coll {
	case sched.Barrier:
	case sched.SendRecv:
		_, _, err = argcheck.CheckP2P(a.Buf(), a.DT, a.Root, a.Tag, c.rank, c.size)
	default:
		err = c.check(a, new(call))
	}
	if err != nil {
		return c.argErr(a.Name(), err)
	}
	return nil
}

// check checks a collective's arguments and describes the call to run in
// k. Nothing is sent for a call that fails it.
func (c *Comm) check(a *args, k *call) error {
	k.Name, k.Coll = a.Name(), a.Coll
	return argcheck.Check(a, c.rank, c.size, &k.Call)
}

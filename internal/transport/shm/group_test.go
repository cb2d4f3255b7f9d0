//go:build linux

package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/allocs"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/sim"
	"github.com/hcomm-go/hcomm/internal/wire"
)

func init() {
	roles["group"] = scenarioGroup
	roles["grpmismatch"] = scenarioGroupMismatch
	roles["grpidle"] = func(ctx context.Context, tr *Transport) error {
		if err := groupBarrier(ctx, tr, 1); err != nil {
			return err
		}
		<-ctx.Done() // killed by the test, or the test ended
		return nil
	}
	roles["grpabort"] = func(ctx context.Context, tr *Transport) error {
		if err := groupBarrier(ctx, tr, 1); err != nil {
			return err
		}
		if tr.Rank() == 1 {
			// The flag stays in the segment after this process exits.
			tr.Abort(errors.New("reason-grp"))
			return nil
		}
		err := groupBarrier(ctx, tr, 2)
		var pe *errs.PeerError
		if !errors.As(err, &pe) || pe.Peer != 1 || !errors.Is(err, errs.ErrAborted) || !strings.Contains(err.Error(), "reason-grp") {
			return fmt.Errorf("Barrier beside an aborting rank: got %v, want PeerError(1, aborted, reason-grp)", err)
		}
		return nil
	}
}

// arm is a transport.Deferred that counts its calls.
type arm struct {
	ctx context.Context
	n   int
}

func (a *arm) Arm() context.Context {
	a.n++
	return a.ctx
}

func groupBarrier(ctx context.Context, tr *Transport, seq uint64) error {
	fp := wire.Fingerprint{Seq: seq, Coll: sched.Barrier, DType: reduce.Uint8}
	return tr.GroupRun(&arm{ctx: ctx}, &fp, nil, nil)
}

// groupCase is one group call of scenarioGroup, the same on every rank.
type groupCase struct {
	coll    sched.Coll
	n       int // elements per rank
	root    int
	inPlace bool
}

func groupCases(size int) []groupCase {
	var cs []groupCase
	for _, n := range []int{0, 1, 2, 7, 8, 9, 64, 255, 256} { // float32 elements: up to groupMax bytes
		for _, ip := range []bool{false, true} {
			cs = append(cs, groupCase{coll: sched.AllReduce, n: n, inPlace: ip})
			cs = append(cs, groupCase{coll: sched.AllGather, n: n, inPlace: ip})
		}
		if n*size*4 <= groupMax {
			for _, ip := range []bool{false, true} {
				cs = append(cs, groupCase{coll: sched.ReduceScatter, n: n, inPlace: ip})
				cs = append(cs, groupCase{coll: sched.AllToAll, n: n, inPlace: ip})
			}
			for root := range size {
				cs = append(cs, groupCase{coll: sched.Scatter, n: n, root: root, inPlace: root == 1})
			}
		}
		for root := range size {
			cs = append(cs, groupCase{coll: sched.Gather, n: n, root: root, inPlace: root == 0})
			cs = append(cs, groupCase{coll: sched.Broadcast, n: n, root: root})
			cs = append(cs, groupCase{coll: sched.Reduce, n: n, root: root, inPlace: root%2 == 0})
			// Several rootward calls in a row: the root runs ahead
			// into slots the others have not finished with.
			cs = append(cs, groupCase{coll: sched.Broadcast, n: n, root: root})
		}
		cs = append(cs, groupCase{coll: sched.Barrier})
	}
	return cs
}

// contribution is rank r's input to call i: small integers, so that float32
// sums are exact in any order.
func contribution(i, r, n int) []float32 {
	v := make([]float32, n)
	for j := range v {
		v[j] = float32((i*7+r*13+j*3)%61 - 30)
	}
	return v
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// runGroupCase runs case i on rank tr and checks its result.
func runGroupCase(ctx context.Context, tr *Transport, seq uint64, i int, c groupCase) error {
	size, me := tr.Size(), tr.Rank()
	fp := wire.Fingerprint{Seq: seq, Coll: c.coll, DType: reduce.Float32, Root: int32(c.root), Count: int64(c.n)}
	if c.coll.Reduces() {
		fp.Op = reduce.Sum
	}
	mine := f32bytes(contribution(i, me, c.n))
	var in, out, want []byte
	switch c.coll {
	case sched.AllReduce, sched.Reduce:
		sum := make([]float32, c.n)
		for r := range size {
			for j, x := range contribution(i, r, c.n) {
				sum[j] += x
			}
		}
		want = f32bytes(sum)
		in, out = mine, make([]byte, len(mine))
		if c.inPlace {
			out = in
		}
		if c.coll == sched.Reduce && me != c.root {
			out, want = nil, nil
		}
	case sched.AllGather:
		for r := range size {
			want = append(want, f32bytes(contribution(i, r, c.n))...)
		}
		out = make([]byte, len(want))
		in = mine
		if c.inPlace {
			copy(out[me*len(mine):], mine)
			in = out[me*len(mine) : (me+1)*len(mine)]
		}
	case sched.Gather:
		in = mine
		if me == c.root {
			for r := range size {
				want = append(want, f32bytes(contribution(i, r, c.n))...)
			}
			out = make([]byte, len(want))
			if c.inPlace {
				copy(out[me*len(mine):], mine)
				in = out[me*len(mine) : (me+1)*len(mine)]
			}
		}
	case sched.ReduceScatter, sched.AllToAll, sched.Scatter:
		// Rank r's input is size blocks of n elements: contribution(i,
		// r, size*n).
		all := make([][]float32, size)
		for r := range all {
			all[r] = contribution(i, r, size*c.n)
		}
		in = f32bytes(all[me])
		blk := func(r, b int) []float32 { return all[r][b*c.n : (b+1)*c.n] }
		switch c.coll {
		case sched.ReduceScatter:
			sum := make([]float32, c.n)
			for r := range size {
				for j, x := range blk(r, me) {
					sum[j] += x
				}
			}
			want = f32bytes(sum)
			out = make([]byte, len(want))
			if c.inPlace {
				out = in[me*len(want) : (me+1)*len(want)]
			}
		case sched.AllToAll:
			for r := range size {
				want = append(want, f32bytes(blk(r, me))...)
			}
			out = make([]byte, len(want))
			if c.inPlace {
				out = in
			}
		case sched.Scatter:
			want = f32bytes(blk(c.root, me))
			out = make([]byte, len(want))
			if me != c.root {
				in = nil
			} else if c.inPlace {
				out = in[me*len(want) : (me+1)*len(want)]
			}
		}
	case sched.Broadcast:
		want = f32bytes(contribution(i, c.root, c.n))
		out = make([]byte, len(want))
		if me == c.root {
			copy(out, want)
		}
	}
	a := &arm{ctx: ctx}
	if err := tr.GroupRun(a, &fp, in, out); err != nil {
		return fmt.Errorf("call %d %+v: %w", i, c, err)
	}
	if a.n > 1 {
		return fmt.Errorf("call %d: Arm called %d times", i, a.n)
	}
	if want != nil && string(out[:len(want)]) != string(want) {
		return fmt.Errorf("call %d %+v: rank %d got %v, want %v", i, c, me, out, want)
	}
	return nil
}

// scenarioGroup runs every group case, more calls than a rank has slots.
func scenarioGroup(ctx context.Context, tr *Transport) error {
	if tr.GroupMax() != groupMax {
		return fmt.Errorf("GroupMax = %d, want %d", tr.GroupMax(), groupMax)
	}
	for i, c := range groupCases(tr.Size()) {
		if err := runGroupCase(ctx, tr, uint64(i+1), i, c); err != nil {
			return err
		}
	}
	return nil
}

// scenarioGroupMismatch: rank 1 calls AllReduce with one element more
// than the others. Every rank must fail with a MismatchError naming a
// rank whose call differs from its own.
func scenarioGroupMismatch(ctx context.Context, tr *Transport) error {
	if err := groupBarrier(ctx, tr, 1); err != nil {
		return err
	}
	n := 4
	if tr.Rank() == 1 {
		n = 5
	}
	fp := wire.Fingerprint{Seq: 2, Coll: sched.AllReduce, DType: reduce.Float32, Op: reduce.Sum, Count: int64(n)}
	in := make([]byte, 4*n)
	err := tr.GroupRun(&arm{ctx: ctx}, &fp, in, make([]byte, len(in)))
	var me *errs.MismatchError
	if !errors.As(err, &me) {
		return fmt.Errorf("AllReduce with different counts: got %v, want a MismatchError", err)
	}
	wantPeer := 1
	if tr.Rank() == 1 {
		wantPeer = 0
	}
	if me.Peer != wantPeer || me.Remote.Count == int64(n) {
		return fmt.Errorf("mismatch names rank %d (count %d), want rank %d with a count other than %d", me.Peer, me.Remote.Count, wantPeer, n)
	}
	return nil
}

func TestGroupLocal(t *testing.T) {
	for _, size := range []int{2, 3, 4} {
		for _, v := range []string{"default", "yield"} {
			t.Run(fmt.Sprintf("%d/%s", size, v), func(t *testing.T) {
				trs := newLocalGroup(t, size, v)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				var wg sync.WaitGroup
				for _, tr := range trs {
					wg.Go(func() {
						if err := scenarioGroup(ctx, tr); err != nil {
							t.Errorf("rank %d: %v", tr.Rank(), err)
							tr.Abort(err)
						}
					})
				}
				wg.Wait()
			})
		}
	}
}

func TestGroupMismatchLocal(t *testing.T) {
	trs := newLocalGroup(t, 3, "default")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, tr := range trs {
		wg.Go(func() {
			if err := scenarioGroupMismatch(ctx, tr); err != nil {
				t.Errorf("rank %d: %v", tr.Rank(), err)
			}
		})
	}
	wg.Wait()
}

// TestGroupCollMismatch: a Broadcast's non-root beside ranks in AllReduce
// fails rather than taking the wrong data.
func TestGroupCollMismatch(t *testing.T) {
	trs := newLocalGroup(t, 2, "default")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 2)
	go func() {
		fp := wire.Fingerprint{Seq: 1, Coll: sched.AllReduce, DType: reduce.Uint8, Op: reduce.Sum, Count: 8}
		errc <- trs[0].GroupRun(&arm{ctx: ctx}, &fp, make([]byte, 8), make([]byte, 8))
	}()
	go func() {
		fp := wire.Fingerprint{Seq: 1, Coll: sched.Broadcast, DType: reduce.Uint8, Count: 8}
		errc <- trs[1].GroupRun(&arm{ctx: ctx}, &fp, nil, make([]byte, 8))
	}()
	for range 2 {
		if err := <-errc; !errors.As(err, new(*errs.MismatchError)) {
			t.Errorf("got %v, want a MismatchError", err)
		}
	}
}

// TestGroupDeadline: a rank alone in a group call fails at its context's
// deadline, having asked for the context once.
func TestGroupDeadline(t *testing.T) {
	trs := newLocalGroup(t, 2, "default")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	a := &arm{ctx: ctx}
	fp := wire.Fingerprint{Seq: 1, Coll: sched.Barrier, DType: reduce.Uint8}
	err := trs[0].GroupRun(a, &fp, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want DeadlineExceeded", err)
	}
	if a.n != 1 {
		t.Errorf("Arm called %d times, want 1", a.n)
	}
}

// TestGroupAbortLocal: a local Abort ends a rank's wait in a group call.
func TestGroupAbortLocal(t *testing.T) {
	trs := newLocalGroup(t, 2, "default")
	a := &arm{ctx: context.Background()}
	fp := wire.Fingerprint{Seq: 1, Coll: sched.Barrier, DType: reduce.Uint8}
	errc := make(chan error, 1)
	go func() { errc <- trs[0].GroupRun(a, &fp, nil, nil) }()
	trs[0].Abort(errors.New("local-reason"))
	if err := <-errc; !errors.Is(err, errs.ErrAborted) {
		t.Errorf("got %v, want ErrAborted", err)
	}
}

func TestGroupBadCalls(t *testing.T) {
	trs := newLocalGroup(t, 2, "default")
	a := &arm{ctx: context.Background()}
	for _, tc := range []struct {
		fp      wire.Fingerprint
		in, out int
	}{
		{wire.Fingerprint{Seq: 1, Coll: wire.CollSendRecv}, 0, 0},
		{wire.Fingerprint{Seq: 1, Coll: sched.Broadcast, Root: 2}, 0, 0},
		{wire.Fingerprint{Seq: 1, Coll: sched.Broadcast, Root: -1}, 0, 0},
		{wire.Fingerprint{Seq: 1, Coll: sched.AllReduce}, 8, 4},
		{wire.Fingerprint{Seq: 1, Coll: sched.AllGather}, 8, 8},
		{wire.Fingerprint{Seq: 1, Coll: sched.Gather}, 8, 8},
		{wire.Fingerprint{Seq: 1, Coll: sched.ReduceScatter}, 8, 8},
		{wire.Fingerprint{Seq: 1, Coll: sched.Scatter}, 8, 8},
		{wire.Fingerprint{Seq: 1, Coll: sched.AllToAll}, 9, 9},
		{wire.Fingerprint{Seq: 1, Coll: sched.AllToAll}, 8, 4},
	} {
		err := trs[0].GroupRun(a, &tc.fp, make([]byte, tc.in), make([]byte, tc.out))
		if !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("%v with %d and %d bytes: got %v, want ErrInvalidArgument", tc.fp, tc.in, tc.out, err)
		}
	}
	fp := wire.Fingerprint{Seq: 1, Coll: sched.AllReduce, DType: reduce.Uint8, Op: reduce.Sum}
	big := make([]byte, groupMax+1)
	if err := trs[0].GroupRun(a, &fp, big, big); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Errorf("contribution of %d bytes: got %v, want ErrInvalidArgument", len(big), err)
	}
	// A transport whose ranks are not all on this host has no group calls.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv := newMemKV()
	var wg sync.WaitGroup
	part := make([]*Transport, 2)
	for r := range 2 {
		wg.Go(func() {
			tr, err := New(ctx, Config{Rank: r * 2, Size: 3, Local: []int{0, 2}, KV: kv})
			if err != nil {
				t.Errorf("New: %v", err)
				return
			}
			part[r] = tr
		})
	}
	wg.Wait()
	for _, tr := range part {
		if tr == nil {
			continue
		}
		if tr.GroupMax() != 0 {
			t.Errorf("GroupMax of a transport reaching 2 of 3 ranks = %d, want 0", tr.GroupMax())
		}
		if err := tr.GroupRun(a, &fp, nil, nil); !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("group call without every rank: got %v, want ErrInvalidArgument", err)
		}
		tr.Close()
	}
}

func TestGroupNoAllocs(t *testing.T) {
	trs := newLocalGroup(t, 2, "default")
	ctx := context.Background()
	in, out := make([]byte, 8), make([]byte, 8)
	in1, out1 := make([]byte, 8), make([]byte, 8)
	a0, a1 := &arm{ctx: ctx}, &arm{ctx: ctx}
	seq := uint64(0)
	start, done := make(chan uint64), make(chan error)
	go func() {
		// The partner runs the same calls; it must not allocate either.
		for s := range start {
			fp := wire.Fingerprint{Seq: s, Coll: sched.AllReduce, DType: reduce.Float32, Op: reduce.Sum, Count: 2}
			done <- trs[1].GroupRun(a1, &fp, in1, out1)
		}
	}()
	defer close(start)
	n := allocs.PerRun(200, 0, func() {
		seq++
		start <- seq
		fp := wire.Fingerprint{Seq: seq, Coll: sched.AllReduce, DType: reduce.Float32, Op: reduce.Sum, Count: 2}
		if err := trs[0].GroupRun(a0, &fp, in, out); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("a group AllReduce allocates %.1f times", n)
	}
}

func TestProcessGroup(t *testing.T) {
	for _, v := range []string{"default", "yield"} {
		t.Run(v, func(t *testing.T) { runScenario(t, 3, "group", v) })
	}
}

func TestProcessGroupMismatch(t *testing.T) {
	runScenario(t, 3, "grpmismatch", "default")
}

// TestProcessGroupPeerKilled: rank 0 waits in a Barrier for ranks 1 (alive,
// idle) and 2 (killed); it must fail naming rank 2 rather than wait for
// rank 1.
func TestProcessGroupPeerKilled(t *testing.T) {
	c := startCluster(t, 3, 0, "grpidle", "default")
	tr := c.transport()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := groupBarrier(ctx, tr, 1); err != nil {
		t.Fatal(err)
	}
	c.kill(2)
	start := time.Now()
	err := groupBarrier(ctx, tr, 2)
	peerErr(t, "Barrier waiting on a killed rank", err, 2, errs.ErrPeerLost)
	// No bound on the time: under load it varies; a hang ends at ctx's
	// deadline with another error.
	t.Logf("Barrier failed %v after the kill", time.Since(start))
	c.kill(1)
	c.wait()
	tr.Close()
	c.assertNoLeftovers()
}

// TestProcessGroupPeerAborts: a rank's Abort ends the others' waits in a
// group call, with its reason (checked by the children, ranks 0 and 2 —
// this process is rank 0).
func TestProcessGroupPeerAborts(t *testing.T) {
	runScenario(t, 3, "grpabort", "default")
}

// TestGroupRootRunsAhead: a Broadcast root runs up to groupSlots calls
// ahead of a reader that has not started, and no further: the reader,
// starting only once the root finished groupSlots calls, still gets every
// call's data.
func TestGroupRootRunsAhead(t *testing.T) {
	trs := newLocalGroup(t, 2, "default")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const calls = 3 * groupSlots
	bcast := func(tr *Transport, i int, buf []byte) error {
		fp := wire.Fingerprint{Seq: uint64(i + 1), Coll: sched.Broadcast, DType: reduce.Uint8, Count: int64(len(buf))}
		return tr.GroupRun(&arm{ctx: ctx}, &fp, nil, buf)
	}
	errc := make(chan error, 1)
	go func() {
		for i := range calls {
			buf := make([]byte, 100)
			fill(buf, i)
			if err := bcast(trs[0], i, buf); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	// The root's done word shows how far it got.
	done := trs[1].grWord(0, grDone)
	for atomic.LoadUint32(done) < groupSlots {
		if ctx.Err() != nil {
			t.Fatal("the root did not finish its first calls")
		}
		runtime.Gosched()
	}
	for i := range calls {
		buf := make([]byte, 100)
		if err := bcast(trs[1], i, buf); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if err := check(buf, i); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("root: %v", err)
	}
}

// TestSimSlotsMatch: the simulator's model of group calls uses as many
// slots per rank and as large a contribution as this transport does.
func TestSimSlotsMatch(t *testing.T) {
	if sim.SlotCount != groupSlots || sim.SlotMax != groupMax {
		t.Fatalf("sim models %d slots of %d bytes per rank; shm has %d of %d", sim.SlotCount, sim.SlotMax, groupSlots, groupMax)
	}
}

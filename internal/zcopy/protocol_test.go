package zcopy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/rma"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/transport/local"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// rec is a record naming buffer id for both input and output.
func rec(flags byte, id uint32) []byte {
	b := make([]byte, RecSize)
	encode(b, flags, id, id, 0, 0)
	return b
}

// The rooted shapes against a peer that speaks the records by hand
// (rank 1 of 2): whatever it sends, rank 0 answers with the path both
// take, or a clear error, and never leaves the peer waiting for a record
// it owes it.
func TestRootedRecords(t *testing.T) {
	bad := rec(0, 0)
	bad[0]++ // bad magic
	type step struct {
		send []byte // the peer sends this (nil: receives a record)
		want byte   // flags the received record must carry (FlagDone checked)
	}
	for _, tc := range []struct {
		name  string
		coll  sched.Coll
		root  int
		peer  []step
		took  bool
		inval bool // Begin fails with ErrInvalidArgument
	}{
		// This rank is a non-root of Gather: its record out, the verdict in.
		{"gather verdict done", sched.Gather, 1, []step{{}, {send: rec(FlagDone, 0)}}, true, false},
		{"gather verdict not taken", sched.Gather, 1, []step{{}, {send: rec(0, 0)}}, false, false},
		{"gather verdict malformed", sched.Gather, 1, []step{{}, {send: bad}}, false, true},
		// A non-root of Broadcast: only the root's record decides.
		{"broadcast root unregistered", sched.Broadcast, 1, []step{{send: rec(0, 0)}}, false, false},
		// A root that took the path is told "done" even so.
		{"broadcast root names an unknown buffer", sched.Broadcast, 1, []step{{send: rec(FlagOut, 5)}, {want: 0}}, false, true},
		{"broadcast root malformed", sched.Broadcast, 1, []step{{send: bad}}, false, true},
		// The root of Gather: a malformed record fails the call here, and
		// the peer is released by a verdict saying done.
		{"gather root, malformed record", sched.Gather, 0, []step{{send: bad}, {want: FlagDone}}, false, true},
		{"gather root, unregistered peer", sched.Gather, 0, []step{{send: rec(0, 0)}, {want: 0}}, false, false},
		// The root of Broadcast with an unregistered buffer: its record
		// says so, and nobody waits for anything else.
		{"broadcast root unregistered here", sched.Broadcast, 0, []step{{want: 0}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			f := local.NewFabric(2)
			fp := &wire.Fingerprint{Seq: 1, Coll: tc.coll}
			r := &Registry{size: 2, mine: make([]byte, 2*RecSize), all: make([]byte, 2*RecSize), recs: make([]record, 2)}
			k := &Call{Coll: tc.coll, Root: tc.root, DT: reduce.Uint8, In: make([]byte, 64), Out: make([]byte, 128), Count: 64}
			z := &Path{Rank: 0, Size: 2, T: f.Endpoint(0), FP: fp, Min: 1}
			type result struct {
				took bool
				err  error
			}
			done := make(chan result, 1)
			go func() {
				took, err := r.Begin(ctx, z, k)
				if err == nil && took {
					err = r.Finish(ctx, z, k)
				}
				done <- result{took, err}
			}()
			peer := f.Endpoint(1)
			for i, s := range tc.peer {
				if s.send != nil {
					if err := peer.Send(ctx, 0, fp, s.send); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					continue
				}
				got := make([]byte, RecSize)
				if err := peer.Recv(ctx, 0, fp, got); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				flags, _, _, _, _, err := Decode(got)
				if err != nil || flags&FlagDone != s.want&FlagDone {
					t.Fatalf("step %d: the peer got flags %#x (%v), want done %v", i, flags, err, s.want&FlagDone != 0)
				}
			}
			res := <-done
			if res.took != tc.took || (res.err != nil) != tc.inval || tc.inval && !errors.Is(res.err, errs.ErrInvalidArgument) {
				t.Fatalf("took %v, err %v; want took %v, invalid %v", res.took, res.err, tc.took, tc.inval)
			}
			if res.err == nil && z.Took != tc.took {
				t.Fatalf("Path.Took %v", z.Took)
			}
		})
	}
}

// A peer naming a buffer this rank does not have, in a call whose flags
// say the path is taken: this rank fails with ErrInvalidArgument, and
// still sends the "done" the peer waits for, except in AllReduce (where
// the peer would read sums this rank could not make) and in an AllGather
// whose outputs are all registered (pushed: the peer waits for this rank
// to write its block into the peer's output): there it tells the peer
// the call is abandoned.
func TestUnresolvableRecord(t *testing.T) {
	for _, tc := range []struct {
		coll    sched.Coll
		flags   byte // the peer's record
		abandon bool
	}{
		{sched.AllGather, FlagIn, false},
		{sched.AllGather, FlagIn | FlagOut, true},
		{sched.AllReduce, FlagIn | FlagOut, true},
	} {
		coll := tc.coll
		t.Run(fmt.Sprintf("%v/flags=%d", coll, tc.flags), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Rank 0's registered buffer; rank 1 speaks by hand, so the
			// exchange is made up: rank 1 maps nothing, yet every rank
			// says it maps every buffer.
			calls := 0
			b, err := rma.NewBuffer(ctx, rma.BufferParams{Rank: 0, Size: 2, N: 4096,
				Exchange: func(_ context.Context, rec []byte) ([]byte, error) {
					calls++
					all := make([]byte, 2*rma.RecordSize)
					copy(all, rec)
					if calls == 2 {
						all[4], all[rma.RecordSize+4] = 1, 1
					}
					return all, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			r := &Registry{}
			x := r.Add(2, b)
			defer r.Release(x)
			m := b.Bytes()
			k := &Call{Coll: coll, DT: reduce.Uint8, Op: reduce.Sum, In: m[:64], Out: m[64:192], Count: 64}
			if coll == sched.AllReduce {
				k.Out = m[64:128]
			}
			f := local.NewFabric(2)
			fp := &wire.Fingerprint{Seq: 1, Coll: coll}
			z := &Path{Rank: 0, Size: 2, T: f.Endpoint(0), FP: fp, Min: 1}
			type result struct {
				took bool
				err  error
			}
			done := make(chan result, 1)
			go func() {
				took, err := r.Begin(ctx, z, k)
				done <- result{took, err}
			}()
			peer := f.Endpoint(1)
			got := make([]byte, RecSize)
			if err := peer.Recv(ctx, 0, fp, got); err != nil {
				t.Fatal(err)
			}
			if err := peer.Send(ctx, 0, fp, rec(tc.flags, 7)); err != nil {
				t.Fatal(err)
			}
			if !tc.abandon {
				// The done round: rank 0 sends first (the lower rank).
				if err := peer.Recv(ctx, 0, fp, got); err != nil {
					t.Fatal(err)
				}
				if err := peer.Send(ctx, 0, fp, rec(tc.flags, 7)); err != nil {
					t.Fatal(err)
				}
			} else {
				// The peer, waiting for the next round, is told the
				// call is abandoned.
				err := peer.Recv(ctx, 0, fp, got)
				if perr := r.peerErr(&Path{Rank: 1, Size: 2, FP: fp}, 0, err); !errors.Is(perr, errAbandoned) {
					t.Fatalf("the peer got %v, want the abandon record", err)
				}
				if coll == sched.AllGather {
					// A pushed call: rank 0 returns once the peer,
					// which pushed its block into rank 0's output,
					// sent its "done".
					select {
					case res := <-done:
						t.Fatalf("rank 0 returned (%v, %v) before the peer's done", res.took, res.err)
					default:
					}
					if err := peer.Send(ctx, 0, fp, rec(tc.flags, 7)); err != nil {
						t.Fatal(err)
					}
				}
			}
			res := <-done
			if res.took || !errors.Is(res.err, errs.ErrInvalidArgument) {
				t.Fatalf("took %v, err %v; want ErrInvalidArgument", res.took, res.err)
			}
		})
	}
}

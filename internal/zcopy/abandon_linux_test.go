package zcopy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/memkv"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/rma"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/transport/local"
	"github.com/hcomm-go/hcomm/internal/transport/shm"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// corrupting is a transport whose first record to rank to (a message of
// RecSize bytes under the call's fingerprint) goes out with byte at
// changed: by default the magic's.
type corrupting struct {
	*shm.Transport
	to   int
	at   int
	done bool
}

func (c *corrupting) bad(peer int, p []byte) []byte {
	if c.done || peer != c.to || len(p) != RecSize {
		return p
	}
	c.done = true
	q := append([]byte(nil), p...)
	q[c.at] ^= 0xa5
	return q
}

func (c *corrupting) Send(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	return c.Transport.Send(ctx, peer, fp, c.bad(peer, p))
}

func (c *corrupting) TrySend(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) (bool, error) {
	q := c.bad(peer, p)
	ok, err := c.Transport.TrySend(ctx, peer, fp, q)
	if !ok && len(q) > 0 && &q[0] != &p[0] {
		c.done = false // not sent: the next attempt is corrupted instead
	}
	return ok, err
}

// shmPair makes two shm transports between goroutines and a registered
// buffer of n bytes on each, mapped by the other.
func shmPair(t testing.TB, ctx context.Context, n int) ([2]*shm.Transport, [2]*Registry, [2]*Buf) {
	t.Helper()
	store := memkv.New()
	var ts [2]*shm.Transport
	var rs [2]*Registry
	var bs [2]*Buf
	var wg sync.WaitGroup
	var errs [2]error
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := shm.New(ctx, shm.Config{Rank: r, Size: 2, Local: []int{0, 1}, KV: store})
			if err != nil {
				errs[r] = err
				return
			}
			ts[r] = tr
			fp := &wire.Fingerprint{Seq: 1 << 40}
			b, err := rma.NewBuffer(ctx, rma.BufferParams{Rank: r, Size: 2, N: n,
				Exchange: func(ctx context.Context, rec []byte) ([]byte, error) {
					all := make([]byte, 2*rma.RecordSize)
					copy(all[r*rma.RecordSize:], rec)
					if err := tr.Send(ctx, 1-r, fp, rec); err != nil {
						return nil, err
					}
					return all, tr.Recv(ctx, 1-r, fp, all[(1-r)*rma.RecordSize:(2-r)*rma.RecordSize])
				}})
			if err != nil {
				errs[r] = err
				return
			}
			rs[r] = &Registry{}
			bs[r] = rs[r].Add(2, b)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for r := range 2 {
			if bs[r] != nil {
				rs[r].Release(bs[r])
			}
			if ts[r] != nil {
				ts[r].Close()
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Skipf("no shared memory here: %v", err)
		}
	}
	if !bs[0].B.Shared || !bs[1].B.Shared {
		t.Skip("the buffers are not mapped by both ranks here")
	}
	return ts, rs, bs
}

// A malformed record in a symmetric call, over the shm transport with
// registered buffers: the rank that receives it fails with
// ErrInvalidArgument, and the peer, which took the path and waits for
// that rank's next record, fails at once with ErrAborted naming it
// instead of waiting for its deadline (the test's one-minute context is
// only a guard: the old code failed it). Where the peer did not take the
// path (the other rank's input is not registered) it runs the program,
// whose first receive from that rank fails with a mismatch instead of
// taking the abandon record for data.
func TestMalformedRecordShm(t *testing.T) {
	for _, tc := range []struct {
		coll   sched.Coll
		unreg0 bool // rank 0's input is not registered: rank 1 runs the program
	}{
		{coll: sched.AllGather},
		{coll: sched.AllToAll},
		{coll: sched.AllReduce},
		{coll: sched.AllGather, unreg0: true},
	} {
		t.Run(fmt.Sprintf("%v/unreg0=%v", tc.coll, tc.unreg0), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const n = 4096
			ts, rs, bs := shmPair(t, ctx, 2*n)
			var wg sync.WaitGroup
			var res [2]error
			var took [2]bool
			for r := range 2 {
				m := bs[r].B.Bytes()
				k := &Call{Coll: tc.coll, DT: reduce.Uint8, Op: reduce.Sum, In: m[:n], Out: m[n : 2*n], Count: n / 2}
				if tc.coll == sched.AllToAll {
					k.Count = n / 2
				}
				if tc.coll == sched.AllReduce {
					k.Count = n
				}
				if tc.unreg0 && r == 0 {
					k.In = make([]byte, n)
				}
				var tr transport.Transport = ts[r]
				if r == 1 {
					tr = &corrupting{Transport: ts[1], to: 0}
				}
				fp := &wire.Fingerprint{Seq: 1, Coll: tc.coll, Count: int64(k.Count)}
				z := &Path{Rank: r, Size: 2, T: tr, FP: fp, Min: 1}
				wg.Add(1)
				go func() {
					defer wg.Done()
					took[r], res[r] = rs[r].Begin(ctx, z, k)
					switch {
					case res[r] == nil && took[r]:
						res[r] = rs[r].Finish(ctx, z, k)
					case res[r] == nil:
						// The program's first message from rank 0.
						res[r] = tr.Recv(ctx, 0, fp, make([]byte, RecSize))
					}
				}()
			}
			wg.Wait()
			if ctx.Err() != nil {
				t.Fatalf("a rank waited for its deadline: %v, %v", res[0], res[1])
			}
			if !errors.Is(res[0], errs.ErrInvalidArgument) {
				t.Errorf("rank 0: %v, want ErrInvalidArgument", res[0])
			}
			var pe *errs.PeerError
			var me *errs.MismatchError
			switch {
			case tc.unreg0:
				if took[1] || !errors.As(res[1], &me) || me.Peer != 0 {
					t.Errorf("rank 1 (took %v): %v, want a mismatch with rank 0", took[1], res[1])
				}
			case !took[1] || !errors.As(res[1], &pe) || pe.Peer != 0 || !errors.Is(res[1], errs.ErrAborted) || !errors.Is(res[1], errAbandoned):
				t.Errorf("rank 1 (took %v): %v, want rank 0 abandoned the call", took[1], res[1])
			}
		})
	}
}

// Three goroutine ranks on the in-process transport (what hcomm.NewLocal
// uses, a rendezvous) take the zero-copy path of an AllReduce; rank 2
// then aborts, as a rank whose call failed does. Ranks 0 and 1 fail the
// middle round on it and return its error at once: they do not abandon
// the call (each would wait in a Send to the other, which receives
// nothing, until the deadline; the one-minute context is only a guard).
func TestPeerFailureLocal(t *testing.T) {
	const size, n = 3, 4096
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := local.NewFabric(size)
	var rs [size]*Registry
	var bs [size]*Buf
	var wg sync.WaitGroup
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr := f.Endpoint(r)
			fp := &wire.Fingerprint{Seq: 1 << 40}
			b, err := rma.NewBuffer(ctx, rma.BufferParams{Rank: r, Size: size, N: 2 * n,
				Exchange: func(ctx context.Context, rec []byte) ([]byte, error) {
					// Each pair in a fixed order: the lower rank sends first.
					all := make([]byte, size*rma.RecordSize)
					copy(all[r*rma.RecordSize:], rec)
					for p := range size {
						if p == r {
							continue
						}
						in := all[p*rma.RecordSize : (p+1)*rma.RecordSize]
						first, second := func() error { return tr.Send(ctx, p, fp, rec) }, func() error { return tr.Recv(ctx, p, fp, in) }
						if r > p {
							first, second = second, first
						}
						if err := first(); err != nil {
							return nil, err
						}
						if err := second(); err != nil {
							return nil, err
						}
					}
					return all, nil
				}})
			if err != nil {
				t.Error(err)
				return
			}
			rs[r] = &Registry{}
			bs[r] = rs[r].Add(size, b)
		}()
	}
	wg.Wait()
	defer func() {
		for r := range size {
			if bs[r] != nil {
				rs[r].Release(bs[r])
			}
		}
	}()
	if t.Failed() {
		return
	}
	if !bs[0].B.Shared {
		t.Skip("the buffers are not mapped by every rank here")
	}
	var res [size]error
	var took [size]bool
	for r := range size {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := bs[r].B.Bytes()
			k := &Call{Coll: sched.AllReduce, DT: reduce.Uint8, Op: reduce.Sum, In: m[:n], Out: m[n : 2*n], Count: n}
			fp := &wire.Fingerprint{Seq: 1, Coll: sched.AllReduce, Count: n}
			z := &Path{Rank: r, Size: size, T: f.Endpoint(r), FP: fp, Min: 1}
			took[r], res[r] = rs[r].Begin(ctx, z, k)
			if res[r] != nil || !took[r] {
				return
			}
			if r == 2 {
				f.Endpoint(2).Abort(errors.New("rank 2 fails"))
				return
			}
			res[r] = rs[r].Finish(ctx, z, k)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("ranks 0 and 1 waited for their deadline: %v, %v", res[0], res[1])
	}
	for r := range 2 {
		var pe *errs.PeerError
		if !took[r] || !errors.As(res[r], &pe) || pe.Peer != 2 || !errors.Is(res[r], errs.ErrAborted) {
			t.Errorf("rank %d (took %v): %v, want rank 2's abort", r, took[r], res[r])
		}
	}
}

// watching is rank 0's transport in TestAbandonPushed: once the rank has
// sent a message under another fingerprint than the call's (its abandon
// record), its next receive from rank 1 closes waiting.
type watching struct {
	*shm.Transport
	call      *wire.Fingerprint
	abandoned bool
	waiting   chan struct{}
}

func (w *watching) note(fp *wire.Fingerprint) {
	if *fp != *w.call {
		w.abandoned = true
	}
}

func (w *watching) Send(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	w.note(fp)
	return w.Transport.Send(ctx, peer, fp, p)
}

func (w *watching) TrySend(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) (bool, error) {
	w.note(fp)
	return w.Transport.TrySend(ctx, peer, fp, p)
}

func (w *watching) Recv(ctx context.Context, peer int, fp *wire.Fingerprint, p []byte) error {
	if w.abandoned && peer == 1 && w.waiting != nil {
		close(w.waiting)
		w.waiting = nil
	}
	return w.Transport.Recv(ctx, peer, fp, p)
}

// A pushed AllGather (two ranks, both outputs registered) that rank 0
// abandons, because rank 1's record is malformed or names a buffer rank 0
// does not have: rank 1 took the path and writes its block into rank 0's
// output, so rank 0 must not return before that is over. Rank 1 pushes
// only once rank 0 has returned or waits for rank 1's next message, and
// rank 0's output is compared, after both are done, with what it held when
// rank 0 returned: a rank that returned at once (the old code) sees its
// output change under it. Both ranks fail as before: rank 0 with
// ErrInvalidArgument, rank 1 told that rank 0 abandoned the call.
func TestAbandonPushed(t *testing.T) {
	for _, tc := range []struct {
		name string
		at   int // the byte of rank 1's record that is changed
	}{
		{"malformed", 0},
		{"unknown-output", 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const n = 8192 // the output; the block of each rank is n/2
			ts, rs, bs := shmPair(t, ctx, 2*n)
			fp := &wire.Fingerprint{Seq: 1, Coll: sched.AllGather, Count: n / 2}
			var calls [2]*Call
			for r := range 2 {
				m := bs[r].B.Bytes()
				calls[r] = &Call{Coll: sched.AllGather, DT: reduce.Uint8, In: m[:n/2], Out: m[n : 2*n], Count: n / 2}
				for i := range calls[r].In {
					calls[r].In[i] = byte(1 + r + i%7)
				}
				clear(calls[r].Out)
			}
			w := &watching{Transport: ts[0], call: fp, waiting: make(chan struct{})}
			waiting := w.waiting
			returned := make(chan struct{})
			var snap []byte
			var res [2]error
			var took [2]bool
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				z := &Path{Rank: 0, Size: 2, T: w, FP: fp, Min: 1}
				took[0], res[0] = rs[0].Begin(ctx, z, calls[0])
				snap = append([]byte(nil), calls[0].Out...)
				close(returned)
			}()
			go func() {
				defer wg.Done()
				z := &Path{Rank: 1, Size: 2, T: &corrupting{Transport: ts[1], to: 0, at: tc.at}, FP: fp, Min: 1}
				took[1], res[1] = rs[1].Begin(ctx, z, calls[1])
				if res[1] != nil || !took[1] {
					return
				}
				select {
				case <-returned:
				case <-waiting:
				case <-ctx.Done():
				}
				res[1] = rs[1].Finish(ctx, z, calls[1])
			}()
			wg.Wait()
			if ctx.Err() != nil {
				t.Fatalf("a rank waited for its deadline: %v, %v", res[0], res[1])
			}
			if took[0] || !errors.Is(res[0], errs.ErrInvalidArgument) {
				t.Errorf("rank 0 (took %v): %v, want ErrInvalidArgument", took[0], res[0])
			}
			var pe *errs.PeerError
			if !took[1] || !errors.As(res[1], &pe) || pe.Peer != 0 || !errors.Is(res[1], errAbandoned) {
				t.Errorf("rank 1 (took %v): %v, want rank 0 abandoned the call", took[1], res[1])
			}
			if i := firstDiff(snap, calls[0].Out); i >= 0 {
				t.Fatalf("rank 0's output changed at byte %d after its call returned (%d, now %d)", i, snap[i], calls[0].Out[i])
			}
		})
	}
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

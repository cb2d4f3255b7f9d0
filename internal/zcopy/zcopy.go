package zcopy

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/spin"
	"github.com/hcomm-go/hcomm/internal/storepick"
	"github.com/hcomm-go/hcomm/internal/topo"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Records: 32 bytes, little endian.
//
//	[0:2]   magic
//	[2]     flags (FlagIn, FlagOut, FlagBig, FlagDone)
//	[3]     0
//	[4:8]   id of the buffer holding the input (0: none)
//	[8:12]  id of the buffer holding the output (0: none)
//	[12:16] the CPU the sender ran on when it sent the record, plus one
//	        (0: unknown); a hint only (round), never trusted for memory
//	[16:24] offset of the input in its buffer
//	[24:32] offset of the output in its buffer
//
// AllToAllV sends each peer its own record, whose input offset is where
// the block for that peer starts (only the sender knows its row of the
// count matrix).
const (
	RecSize = 32
	magic   = 0x5a43 // "CZ"

	FlagIn   = 1 // the input is registered
	FlagOut  = 2 // the output is registered
	FlagBig  = 4 // AllToAllV: this rank's part is at least the threshold
	FlagDone = 8 // Gather, Reduce: the root took the path and no longer reads the inputs
)

// Call is one collective call, as the path sees it.
type Call struct {
	Coll    sched.Coll
	Root    int
	InPlace bool
	DT      reduce.DType
	Op      reduce.Op
	In, Out []byte
	Count   int         // elements per rank (AllToAll: per pair) of a uniform call
	Spec    *sched.Spec // the counts of a V form; nil: uniform
}

// Candidate reports whether k may take the zero-copy path on a
// communicator of size ranks with the threshold min (bytes; <= 0: off);
// with auto, not where the ordinary program is faster (Ordinary). Every
// rank gets the same answer for the same call.
func (r *Registry) Candidate(size, min int, auto bool, k *Call) bool {
	if r.live.Load() == 0 || size < 2 || min <= 0 {
		return false
	}
	es := k.DT.Size()
	var n int // bytes, the same on every rank
	if k.Spec != nil {
		switch k.Coll {
		case sched.AllGather, sched.ReduceScatter:
			n = k.Spec.Total() * es
		case sched.AllToAll:
			// Each rank knows only its row and column of the counts:
			// the ranks agree through FlagBig in the records.
			return !k.Spec.InPlace
		default:
			return false
		}
		return n >= min && !(auto && Ordinary(k.Coll, size, n))
	}
	switch k.Coll {
	case sched.AllGather, sched.Broadcast, sched.ReduceScatter, sched.AllReduce, sched.Reduce:
		n = max(len(k.In), len(k.Out))
		if k.Coll == sched.Reduce {
			n = len(k.In)
		}
	case sched.AllToAll:
		if k.InPlace {
			return false
		}
		n = len(k.In)
	case sched.Gather, sched.Scatter:
		n = size * k.Count * es
	default:
		return false
	}
	return n >= min && !(auto && Ordinary(k.Coll, size, n))
}

// record is a peer's record, decoded once per call and resolved to the
// peer's memory as mapped here.
type record struct {
	flags   byte
	in, out []byte // the peer's buffer from the named offset on (nil: none)
}

// Decode decodes a record (untrusted input: fuzzed) into its fields.
func Decode(q []byte) (flags byte, inID, outID uint32, inOff, outOff uint64, err error) {
	if len(q) < RecSize {
		return 0, 0, 0, 0, 0, fmt.Errorf("record of %d bytes, want %d", len(q), RecSize)
	}
	if m := binary.LittleEndian.Uint16(q); m != magic {
		return 0, 0, 0, 0, 0, fmt.Errorf("bad magic %#x", m)
	}
	if q[2]&^(FlagIn|FlagOut|FlagBig|FlagDone) != 0 || q[3] != 0 {
		return 0, 0, 0, 0, 0, fmt.Errorf("reserved bits set")
	}
	return q[2], binary.LittleEndian.Uint32(q[4:]), binary.LittleEndian.Uint32(q[8:]),
		binary.LittleEndian.Uint64(q[16:]), binary.LittleEndian.Uint64(q[24:]), nil
}

func encode(b []byte, flags byte, inID, outID uint32, inOff, outOff uint64) {
	clear(b[:RecSize])
	binary.LittleEndian.PutUint16(b[0:], magic)
	b[2] = flags
	binary.LittleEndian.PutUint32(b[4:], inID)
	binary.LittleEndian.PutUint32(b[8:], outID)
	binary.LittleEndian.PutUint64(b[16:], inOff)
	binary.LittleEndian.PutUint64(b[24:], outOff)
}

// recCPU returns the CPU a record's sender ran on, or -1 (unknown).
func recCPU(q []byte) int { return int(binary.LittleEndian.Uint32(q[12:])) - 1 }

// Tail returns m[off:], or false when off is past m's end.
func Tail(m []byte, off uint64) ([]byte, bool) {
	if off > uint64(len(m)) {
		return nil, false
	}
	return m[off:], true
}

// decode decodes and resolves rank p's record in r.all into r.recs[p].
func (r *Registry) decode(p int) error {
	flags, inID, outID, inOff, outOff, err := Decode(r.all[p*RecSize:])
	if err != nil {
		return invalid("rank %d sent a malformed zero-copy record: %v", p, err)
	}
	q := &r.recs[p]
	*q = record{flags: flags}
	if flags&FlagIn != 0 {
		if q.in, err = r.resolve(p, inID, inOff); err != nil {
			return err
		}
	}
	if flags&FlagOut != 0 {
		if q.out, err = r.resolve(p, outID, outOff); err != nil {
			return err
		}
	}
	return nil
}

func (r *Registry) resolve(p int, id uint32, off uint64) ([]byte, error) {
	b := r.byIDs(id)
	if b == nil {
		return nil, invalid("rank %d names registered buffer %d, which this rank does not have", p, id)
	}
	m := b.B.Peer(p)
	if m == nil {
		return nil, invalid("rank %d names registered buffer %d, which this rank does not map", p, id)
	}
	t, ok := Tail(m, off)
	if !ok {
		return nil, invalid("rank %d's registered offset %d is outside its buffer of %d bytes", p, off, len(m))
	}
	return t, nil
}

// peer returns n bytes at lo of rank p's input (out: output) as mapped
// here.
func (r *Registry) peer(p int, out bool, lo, n int) ([]byte, error) {
	m := r.recs[p].in
	if out {
		m = r.recs[p].out
	}
	if lo < 0 || n < 0 || lo > len(m) || n > len(m)-lo {
		return nil, invalid("rank %d's registered range [%d, +%d) is outside its buffer (%d bytes from the offset it named)", p, lo, n, len(m))
	}
	return m[lo : lo+n : lo+n], nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errs.ErrInvalidArgument}, args...)...)
}

// need returns the flags rank p's record must carry for k to take the
// path: every buffer some rank reads from a peer is registered.
func need(k *Call, p int) byte {
	switch k.Coll {
	case sched.AllReduce:
		return FlagIn | FlagOut
	case sched.Broadcast:
		if p == k.Root {
			return FlagOut
		}
		return 0
	case sched.Scatter:
		if p == k.Root {
			return FlagIn
		}
		return 0
	case sched.Gather, sched.Reduce:
		if p == k.Root {
			return 0
		}
		return FlagIn
	}
	return FlagIn
}

// Algo names the zero-copy path where an algorithm's name is shown (the
// Observer's OpEvent, trace files).
const Algo = "zero-copy"

// Path is what a call needs of its communicator, and what Begin and
// Finish tell of the call.
type Path struct {
	Rank, Size int
	T          transport.Transport
	FP         *wire.Fingerprint
	Min        int                          // the threshold (AllToAllV decides through FlagBig)
	Clock      interface{ Now() time.Time } // if set, Begin reads it once the ranks agree (Met)

	Took bool      // the call takes the zero-copy path
	Met  time.Time // when the ranks' agreement had arrived (Clock set)
	Msgs int       // records this rank sent and received

	done bool // Begin also completed the call (a non-root of Gather or Reduce)
	push bool // an AllGather whose ranks write their blocks into every output (push)
}

// How a call's ranks agree on the path and complete it. Where only the
// root's buffer is read (Broadcast, Scatter) only the root's record
// matters, and where only the root reads (Gather, Reduce) only the
// root decides: these exchange one record each way between the root and
// each other rank, and the non-roots wait for nobody but the root. The
// others exchange records between every pair, twice (three times for
// AllReduce).
const (
	symmetric = iota
	fromRoot  // Broadcast, Scatter: the root sends its record; the others pull and answer "done"
	toRoot    // Gather, Reduce: the others send their records; the root pulls and answers with its verdict
)

func shapeOf(k *Call) int {
	switch k.Coll {
	case sched.Broadcast, sched.Scatter:
		return fromRoot
	case sched.Gather, sched.Reduce:
		return toRoot
	}
	return symmetric
}

// Msgs returns the records rank me of size ranks sends and receives in a
// call k that takes the zero-copy path (Path.Msgs once it has run).
func Msgs(k *Call, me, size int) int {
	switch shapeOf(k) {
	case fromRoot, toRoot:
		if me == k.Root {
			return 2 * (size - 1)
		}
		return 2
	}
	if k.Coll == sched.AllReduce {
		return 6 * (size - 1)
	}
	return 4 * (size - 1)
}

// Begin is the ranks' agreement on candidate k: it reports whether the
// call takes the zero-copy path (then Finish must follow) or runs its
// program, whose messages follow the records (false and no error). Every
// rank gets the same answer. The caller holds r.Mu shared until Finish
// returns.
func (r *Registry) Begin(ctx context.Context, z *Path, k *Call) (bool, error) {
	r.mark(phBegin)
	z.push = false
	r.lingerFor = lingerFor(max(len(k.In), len(k.Out)))
	inID, inOff := r.find(k.In)
	outID, outOff := r.find(k.Out)
	var flags byte
	if inID != 0 {
		flags |= FlagIn
	}
	if outID != 0 {
		flags |= FlagOut
	}
	v := k.Spec != nil && k.Coll == sched.AllToAll
	if v {
		if max(len(k.In), len(k.Out)) >= z.Min {
			flags |= FlagBig
		}
		es := k.DT.Size()
		for p := range z.Size {
			encode(r.mine[p*RecSize:], flags, inID, outID, uint64(inOff+k.Spec.SendDispl(z.Rank, p)*es), uint64(outOff))
		}
	} else {
		encode(r.mine, flags, inID, outID, uint64(inOff), uint64(outOff))
	}
	took, err := false, error(nil)
	switch shapeOf(k) {
	case fromRoot:
		took, err = r.beginFrom(ctx, z, k)
	case toRoot:
		took, err = r.beginTo(ctx, z, k)
	default:
		took, err = r.beginAll(ctx, z, k, v)
	}
	if err != nil || !took {
		return false, err
	}
	r.Hits.Add(1)
	z.Took = true
	return true, nil
}

// agreed stamps the moment the ranks' agreement was in (Met).
func (z *Path) agreed() {
	if z.Clock != nil {
		z.Met = z.Clock.Now()
	}
}

// beginAll: every rank sends its record to every other.
func (r *Registry) beginAll(ctx context.Context, z *Path, k *Call, v bool) (bool, error) {
	if err := r.round(ctx, z, v, nil); err != nil {
		return false, err
	}
	z.agreed()
	took, big := true, !v
	outs := true  // every rank's output is registered (pushes)
	var bad error // a record this rank cannot resolve
	for p := range z.Size {
		if err := r.decode(p); err != nil {
			flags, _, _, _, _, e := Decode(r.all[p*RecSize:])
			if e != nil {
				// This rank cannot tell what the sender decided, so not
				// whether the others took the path: it abandons the call
				// and tells them (abandon). Where the others may push
				// into its output (its own record allows it), it waits
				// until they no longer do.
				if own := r.mine[2]; pushes(k, z.Size, own&FlagOut != 0) && own&FlagIn != 0 {
					r.abandonPushed(ctx, z)
				} else {
					r.abandon(ctx, z)
				}
				return false, err
			}
			r.recs[p], bad = record{flags: flags}, cmp.Or(bad, err)
		}
		f := r.recs[p].flags
		if n := need(k, p); f&n != n {
			took = false
		}
		big = big || f&FlagBig != 0
		outs = outs && f&FlagOut != 0
	}
	z.push = took && pushes(k, z.Size, outs)
	switch {
	case !took || !big:
		return false, nil
	case bad != nil:
		// The others decide from the same flags: they take the path and
		// wait for this rank's "done". They read only its input, which
		// is sound, except in AllReduce, where they would read segments
		// of its output that it cannot reduce, and in a pushed
		// AllGather, where they wait for this rank to write its block
		// into their outputs: there they are told the call is abandoned
		// (the round they wait in fails) rather than return wrong bytes.
		// A pushing peer writes into this rank's output meanwhile: this
		// rank returns only once it no longer does (abandonPushed).
		switch {
		case z.push:
			r.abandonPushed(ctx, z)
		case k.Coll != sched.AllReduce:
			r.round(ctx, z, false, nil)
		default:
			r.abandon(ctx, z)
		}
		return false, bad
	}
	return true, nil
}

// beginFrom: the root's record decides (only its buffer is read).
func (r *Registry) beginFrom(ctx context.Context, z *Path, k *Call) (bool, error) {
	root := k.Root
	if z.Rank == root {
		for p := range z.Size {
			if p != root {
				if err := r.send(ctx, z, p, r.mine[:RecSize]); err != nil {
					return false, err
				}
			}
		}
		z.agreed()
		n := need(k, root)
		return r.mine[2]&n == n, nil
	}
	if err := r.recv(ctx, z, root); err != nil {
		return false, err
	}
	z.agreed()
	n := need(k, root)
	if err := r.decode(root); err != nil {
		// A root whose flags say it took the path waits for "done":
		// release it (it reads nothing of this rank's).
		if f, _, _, _, _, e := Decode(r.all[root*RecSize:]); e == nil && f&n == n {
			r.send(ctx, z, root, r.mine[:RecSize])
		}
		return false, err
	}
	return r.recs[root].flags&n == n, nil
}

// beginTo: the root decides from the others' records (only it reads) and
// tells them in its verdict, at once when the path is not taken, else
// once it is done (Finish); a non-root's call ends with the verdict.
func (r *Registry) beginTo(ctx context.Context, z *Path, k *Call) (bool, error) {
	root := k.Root
	if z.Rank != root {
		if err := r.send(ctx, z, root, r.mine[:RecSize]); err != nil {
			return false, err
		}
		if err := r.recv(ctx, z, root); err != nil {
			return false, err
		}
		z.agreed()
		flags, _, _, _, _, err := Decode(r.all[root*RecSize:])
		if err != nil {
			return false, invalid("rank %d sent a malformed zero-copy verdict: %v", root, err)
		}
		z.done = true
		return flags&FlagDone != 0, nil
	}
	took := true
	var err error
	for p := range z.Size {
		if p == root {
			continue
		}
		if e := r.recv(ctx, z, p); e != nil {
			return false, e
		}
		if err == nil {
			err = r.decode(p)
		}
		if n := need(k, p); err == nil && r.recs[p].flags&n != n {
			took = false
		}
	}
	z.agreed()
	if err != nil {
		// The others are released (the root reads nothing of theirs)
		// rather than left waiting.
		r.verdict(ctx, z, k, FlagDone)
		return false, err
	}
	if !took {
		return false, r.verdict(ctx, z, k, 0)
	}
	return true, nil
}

// verdict sends the root's verdict (flags) to every other rank.
func (r *Registry) verdict(ctx context.Context, z *Path, k *Call, flags byte) error {
	encode(r.mine, flags, 0, 0, 0, 0)
	for p := range z.Size {
		if p != k.Root {
			if err := r.send(ctx, z, p, r.mine[:RecSize]); err != nil {
				return err
			}
		}
	}
	return nil
}

// Finish moves the bytes of a call Begin agreed on and completes it:
// once it returns no rank reads or writes this rank's memory for the
// call.
func (r *Registry) Finish(ctx context.Context, z *Path, k *Call) error {
	if z.done {
		return nil
	}
	r.ntMin = reduce.StreamMin
	var pick *storepick.Pick // chooses this call's stores by timing (stores.go)
	if shapeOf(k) == symmetric {
		r.ntMin = symStreamMin
		if pick = r.storePick(k, z.Size); pick != nil && pick.Plain() {
			r.ntMin = math.MaxInt
		}
	}
	switch shapeOf(k) {
	case fromRoot:
		if z.Rank != k.Root {
			// The root waits for "done" whatever happens here.
			err := r.move(ctx, z, k)
			if e := r.send(ctx, z, k.Root, r.mine[:RecSize]); err == nil {
				err = e
			}
			return err
		}
		if err := r.move(ctx, z, k); err != nil {
			return err
		}
		for p := range z.Size {
			if p != k.Root {
				if err := r.recv(ctx, z, p); err != nil {
					return err
				}
			}
		}
		return nil
	case toRoot:
		// The others wait for the verdict whatever happens here.
		err := r.move(ctx, z, k)
		if e := r.verdict(ctx, z, k, FlagDone); err == nil {
			err = e
		}
		return err
	}
	var start time.Time
	if pick != nil {
		start = time.Now()
	}
	if err := r.move(ctx, z, k); err != nil {
		// The peers wait for this rank's "done" (or AllReduce's middle
		// round): they fail at once instead. Not when a peer failed the
		// move (its abort, its abandon record, a mismatch): that peer
		// told the others, or its communicator's abort will. Two ranks
		// failing on it together would otherwise each wait in a Send
		// to the other where the transport is a rendezvous (local).
		// A pushing peer may be writing into this rank's output: this
		// rank returns once it no longer does (abandonPushed).
		switch {
		case peerFailed(err):
		case z.push:
			r.abandonPushed(ctx, z)
		default:
			r.abandon(ctx, z)
		}
		return err
	}
	if pick != nil {
		pick.Took(int64(time.Since(start)))
	}
	r.mark(phMoved)
	// Done: nobody reads or writes another rank's memory after this. The
	// own block of an AllGather or AllToAll is copied meanwhile.
	return r.round(ctx, z, false, k)
}

// errAbandoned is the cause of the error a rank's symmetric call returns
// when a peer abandoned it (abandon).
var errAbandoned = errors.New("it abandoned the zero-copy call: a record it received was malformed, or named memory it could not use")

// setAbandonFP sets r.abandonFP to the fingerprint of an abandon message of
// the call fp: fp with Count bit-inverted, which matches no message of
// any call.
func (r *Registry) setAbandonFP(fp *wire.Fingerprint) *wire.Fingerprint {
	r.abandonFP = *fp
	r.abandonFP.Count = ^fp.Count
	return &r.abandonFP
}

// abandon tells every peer that this rank leaves a symmetric call it
// cannot complete, whatever each peer decided: a record under another
// fingerprint (setAbandonFP). A peer waiting in a record round for this
// rank's next record fails at once with a *errs.PeerError (ErrAborted,
// errAbandoned: peerErr); a peer that ran the call's program instead
// fails on it with an *errs.MismatchError, which a message of the
// program could never be taken for. Where the transport takes the record
// at once (shm, mux: transport.Eager) nothing here waits; where it
// does not (the in-process transport of goroutine ranks) the Send waits
// for the peer's receive, or until ctx ends or either side aborts: so
// only a rank failing for its own reason abandons (Finish). Either way
// the failed call then aborts the communicator, which tells the peers
// too.
func (r *Registry) abandon(ctx context.Context, z *Path) {
	fp := r.setAbandonFP(z.FP)
	encode(r.mine, 0, 0, 0, 0, 0)
	eg, eager := z.T.(transport.Eager)
	for p := range z.Size {
		switch {
		case p == z.Rank:
		case eager:
			eg.TrySend(ctx, p, fp, r.mine[:RecSize])
		default:
			z.T.Send(ctx, p, fp, r.mine[:RecSize])
		}
	}
}

// abandonPushed abandons a pushed AllGather and returns only once no peer
// writes into this rank's output any more. A peer that took the path
// pushes its block into every output, this rank's included, before it
// sends its "done" record (Finish), so returning at once, as abandon
// does, would give the caller back an output a peer is still writing
// into. This rank takes part in the done round instead, with the abandon
// record (under abandon's fingerprint) in place of its own: the peer
// fails at its end of the round as it does on abandon, and this rank
// waits for the peer's next message of the call, which comes once the
// peer's push is over: its "done", its own abandon (a mismatch here), or
// the failure of the peer or of the wait (its ctx). The order of each
// pair is the round's (eager where the transport takes the record at
// once, else the lower rank sends first), so it never deadlocks against
// the peer's round or against the peer's own abandonPushed.
func (r *Registry) abandonPushed(ctx context.Context, z *Path) {
	fp := r.setAbandonFP(z.FP)
	encode(r.mine, 0, 0, 0, 0, 0)
	rec := r.mine[:RecSize]
	eg, eager := z.T.(transport.Eager)
	for p := range z.Size {
		if p == z.Rank {
			continue
		}
		sent := false
		if eager {
			sent, _ = eg.TrySend(ctx, p, fp, rec)
		}
		if !sent && z.Rank < p {
			z.T.Send(ctx, p, fp, rec)
			sent = true
		}
		// The peer's next message: whatever it is (or the error), the
		// peer has stopped writing here.
		z.T.Recv(ctx, p, z.FP, r.all[p*RecSize:(p+1)*RecSize])
		if !sent {
			z.T.Send(ctx, p, fp, rec)
		}
	}
}

// peerFailed reports whether err is a peer's failure rather than this
// rank's own: a *errs.PeerError or *errs.MismatchError.
func peerFailed(err error) bool {
	var pe *errs.PeerError
	var me *errs.MismatchError
	return errors.As(err, &pe) || errors.As(err, &me)
}

// peerErr is the error of a wait for rank p's record in a symmetric
// call: a *errs.PeerError saying p abandoned the call when p's message
// was abandon's, else err.
func (r *Registry) peerErr(z *Path, p int, err error) error {
	var m *errs.MismatchError
	if errors.As(err, &m) && m.Peer == p && m.Remote == *r.setAbandonFP(z.FP) {
		return &errs.PeerError{Peer: p, Kind: errs.ErrAborted, Cause: errAbandoned}
	}
	return err
}

// send sends b to rank p: at once where the transport takes it
// (transport.Eager), else by a Send that p's matching Recv completes (p
// receives from this rank before it sends to it, in every shape).
func (r *Registry) send(ctx context.Context, z *Path, p int, b []byte) error {
	z.Msgs++
	if eg, ok := z.T.(transport.Eager); ok {
		if ok, err := eg.TrySend(ctx, p, z.FP, b); ok || err != nil {
			return err
		}
	}
	return z.T.Send(ctx, p, z.FP, b)
}

// recv receives rank p's record into r.all. The rooted calls do not poll
// first (linger): under load it made no difference to a Broadcast's
// (BenchmarkSymmetric, 2026-11-24), whose non-root returns once it has
// sent "done", so the ranks do not fall into step with each other's
// wake-ups as the symmetric calls did.
func (r *Registry) recv(ctx context.Context, z *Path, p int) error {
	z.Msgs++
	return z.T.Recv(ctx, p, z.FP, r.all[p*RecSize:(p+1)*RecSize])
}

// round sends this rank's record (perPeer: a record of its own to each
// rank) to every peer and receives each peer's into r.all. Records go out
// first wherever the transport takes them at once (transport.Eager), so a
// round costs one one-way latency; the other pairs talk in a fixed order
// (lower rank sends first), which never deadlocks, even where a Send waits
// for its Recv: the least pair still pending is reached by both of its
// ranks, and a record already sent only removes a wait.
//
// own, if set, is a call whose own block (ownBlock) is copied once the
// eager records are out, before the receives: the done round of an
// AllGather or AllToAll overlaps that copy with the peers' last reads.
func (r *Registry) round(ctx context.Context, z *Path, perPeer bool, own *Call) error {
	me := z.Rank
	rec := func(p int) []byte {
		if perPeer {
			return r.mine[p*RecSize : (p+1)*RecSize]
		}
		return r.mine[:RecSize]
	}
	// The records carry this rank's CPU (moveApart).
	cpu := uint32(topo.CurrentCPU() + 1)
	if perPeer {
		for p := range z.Size {
			binary.LittleEndian.PutUint32(r.mine[p*RecSize+12:], cpu)
		}
	} else {
		binary.LittleEndian.PutUint32(r.mine[12:], cpu)
	}
	copy(r.all[me*RecSize:], rec(me))
	z.Msgs += 2 * (z.Size - 1)
	var sent uint64 // bit p: the record already went to p
	if eg, ok := z.T.(transport.Eager); ok && z.Size <= 64 {
		for p := range z.Size {
			if p == me {
				continue
			}
			ok, err := eg.TrySend(ctx, p, z.FP, rec(p))
			if err != nil {
				return err
			}
			if ok {
				sent |= 1 << p
			}
		}
	}
	var ownErr error // returned once the round is complete: the peers wait for it
	if own != nil {
		r.mark(phSent2)
		ownErr = r.ownBlock(z, own)
		r.mark(phOwn)
	} else {
		r.mark(phSent1)
	}
	for p := range z.Size {
		if p == me {
			continue
		}
		in := r.all[p*RecSize : (p+1)*RecSize]
		switch {
		case sent&(1<<p) != 0:
			r.linger(z, p)
			if err := z.T.Recv(ctx, p, z.FP, in); err != nil {
				return r.peerErr(z, p, err)
			}
		case me < p:
			if err := z.T.Send(ctx, p, z.FP, rec(p)); err != nil {
				return err
			}
			if err := z.T.Recv(ctx, p, z.FP, in); err != nil {
				return r.peerErr(z, p, err)
			}
		default:
			if err := z.T.Recv(ctx, p, z.FP, in); err != nil {
				return r.peerErr(z, p, err)
			}
			if err := z.T.Send(ctx, p, z.FP, rec(p)); err != nil {
				return err
			}
		}
	}
	if own != nil {
		r.mark(phDone)
	} else {
		r.mark(phMet)
		r.moveApart(z)
	}
	return ownErr
}

// moveApart moves this rank's thread off its CPU when a lower rank's
// record of the round just met says it ran there too. A rank asleep in a
// receive is placed, when its peer's record wakes it, by the kernel's
// wake-up balancing, which on a busy machine puts it on the waker's CPU;
// two ranks of a symmetric call then take turns on one CPU (their copies,
// which should overlap, run one after the other) until the load balancer
// parts them. Only the higher rank of such a pair moves, so the two do not
// both leave the CPU for the same other one; the shm transport's group
// calls do the same (its moveApart). topo.MoveOff moves only where the
// thread may run on a CPU per rank.
func (r *Registry) moveApart(z *Path) {
	c := -2 // not read yet
	for p := range z.Rank {
		q := recCPU(r.all[p*RecSize:])
		if q < 0 {
			continue
		}
		if c == -2 {
			if c = topo.CurrentCPU(); c < 0 {
				return
			}
		}
		if q == c {
			topo.MoveOff(c, z.Size)
			r.Moves.Add(1)
			return
		}
	}
}

// How long a rank of a symmetric call polls for a peer's record before it
// blocks in the transport's receive (linger). The shm receive polls only
// about 10 µs before it sleeps on a futex, and a rank of a large call
// waits for its peer longer than that nearly every time — the ranks'
// copies differ by tens of µs, and the rank woken last in one call is
// late by its wake-up in the next — so each call paid a futex sleep and
// a wake-up. The poll lasts about as long as a copy of the call's bytes at
// lingerRate, within [lingerMin, lingerMax], and yields the CPU between
// looks (sched_yield). A yield that kept this rank off its CPU for more
// than lingerBusy means other processes want it: the rank then stops
// polling and blocks in the receive (a poll on a busy machine takes CPU
// time from the peer it waits for). A poll that ends without the record
// (out of budget, or the CPU busy) is a miss: after m misses in a row the
// next 2^m − 1 waits (at most 63) block at once, so that on a loaded
// machine, where the waits are long, the ranks mostly sleep as before;
// a record found while polling ends the run of misses. BenchmarkSymmetric
// sets lingerMax to compare (0: no polling here).
var (
	lingerRate = 8 << 10 // bytes per µs
	lingerMin  = 20 * time.Microsecond
	lingerMax  = 100 * time.Microsecond
	lingerBusy = 20 * time.Microsecond
)

// lingerFor returns the polling budget of a call of n bytes.
func lingerFor(n int) time.Duration {
	if lingerMax <= 0 {
		return 0
	}
	return min(max(time.Duration(n/lingerRate)*time.Microsecond, lingerMin), lingerMax)
}

// linger polls for rank p's next message, for at most r.lingerFor, where
// the transport can tell that it arrived (transport.Prober). Between
// looks it lets this process's goroutines and then other processes run.
func (r *Registry) linger(z *Path, p int) {
	pr, ok := z.T.(transport.Prober)
	if !ok || r.lingerFor <= 0 {
		return
	}
	if r.lingerSkip > 0 {
		r.lingerSkip--
		return
	}
	var start time.Time
	for i := 0; !pr.Arrived(p); i++ {
		if i%16 != 15 {
			continue
		}
		t := time.Now()
		if start.IsZero() {
			start = t
		} else if t.Sub(start) > r.lingerFor {
			r.lingerMissed()
			return
		}
		runtime.Gosched()
		spin.YieldCPU()
		if time.Since(t) > lingerBusy {
			r.lingerMissed()
			return
		}
	}
	r.lingerMiss = 0
}

// lingerMissed counts a poll that ended without the record and sets how
// many waits block at once before the next poll (linger).
func (r *Registry) lingerMissed() {
	r.lingerMiss = min(r.lingerMiss+1, 6)
	r.lingerSkip = 1<<r.lingerMiss - 1
}

// blk returns rank p's block of k: its offset and length in bytes.
func blk(k *Call, p int) (off, n int) {
	es := k.DT.Size()
	if k.Spec != nil {
		return k.Spec.Displ(p) * es, k.Spec.Count(p) * es
	}
	return p * k.Count * es, k.Count * es
}

// move moves the call's bytes between the mapped buffers.
func (r *Registry) move(ctx context.Context, z *Path, k *Call) error {
	n, me := z.Size, z.Rank
	switch k.Coll {
	case sched.Broadcast:
		if me == k.Root {
			return nil
		}
		src, err := r.peer(k.Root, true, 0, len(k.Out))
		if err != nil {
			return err
		}
		r.copy(k.Out, src)
	case sched.AllGather, sched.Gather:
		if k.Coll == sched.Gather && me != k.Root {
			return nil
		}
		if z.push {
			return r.push(z, k)
		}
		for i := range n {
			p := (me + i) % n
			off, l := blk(k, p)
			dst := k.Out[off : off+l]
			if p == me {
				// AllGather's own block: ownBlock, during the done round.
				if k.Coll == sched.Gather && !k.InPlace {
					r.copy(dst, k.In) // large blocks around the caches, as the peers' are
				}
				continue
			}
			src, err := r.peer(p, false, 0, l)
			if err != nil {
				return err
			}
			r.copy(dst, src)
		}
	case sched.Scatter:
		off, l := blk(k, me)
		if me == k.Root {
			if !k.InPlace {
				r.copy(k.Out, k.In[off:off+l])
			}
			return nil
		}
		src, err := r.peer(k.Root, false, off, l)
		if err != nil {
			return err
		}
		r.copy(k.Out, src)
	case sched.AllToAll:
		// The own block (i = 0): ownBlock, during the done round.
		if k.Spec != nil {
			es := k.DT.Size()
			for i := 1; i < n; i++ {
				p := (me + i) % n
				l := k.Spec.Matrix[p][me] * es
				off := k.Spec.RecvDispl(me, p) * es
				src, err := r.peer(p, false, 0, l)
				if err != nil {
					return err
				}
				r.copy(k.Out[off:off+l], src)
			}
			return nil
		}
		b := len(k.In) / n
		for i := 1; i < n; i++ {
			p := (me + i) % n
			src, err := r.peer(p, false, me*b, b)
			if err != nil {
				return err
			}
			r.copy(k.Out[p*b:(p+1)*b], src)
		}
	case sched.ReduceScatter:
		off, _ := blk(k, me)
		return r.reduce(z, k, off, k.Out)
	case sched.Reduce:
		if me != k.Root {
			return nil
		}
		return r.reduce(z, k, 0, k.Out[:len(k.In)])
	case sched.AllReduce:
		lo, hi := seg(n, len(k.Out), k.DT.Size(), me)
		if err := r.reduce(z, k, lo, k.Out[lo:hi]); err != nil {
			return err
		}
		// Every segment is reduced before anyone copies it.
		if err := r.round(ctx, z, false, nil); err != nil {
			return err
		}
		for i := 1; i < n; i++ {
			p := (me + i) % n
			lo, hi := seg(n, len(k.Out), k.DT.Size(), p)
			src, err := r.peer(p, true, lo, hi-lo)
			if err != nil {
				return err
			}
			r.copy(k.Out[lo:hi], src)
		}
	}
	return nil
}

// pushes reports whether an AllGather of size ranks that takes the path
// pushes (push): with two ranks, when both outputs are registered (outs,
// from the records, so every rank decides alike). With four ranks on two
// CPUs pushing was slower at 2 and 8 MiB (per-call medians 0.77× and
// 0.72× of pulling, 7 alternated runs under load; 1.5× faster at 512 KiB
// and 32 MiB): more ranks keep pulling until measured where each has a
// CPU.
func pushes(k *Call, size int, outs bool) bool {
	return k.Coll == sched.AllGather && size == 2 && outs && !pushOff
}

// pushOff makes every AllGather pull (BenchmarkSymmetric sets it to
// compare).
var pushOff bool

// pushPiece is the piece of its block a pushing rank reads once and then
// writes to every output: small enough to be read again from the
// nearest caches.
const pushPiece = 64 << 10

// push writes this rank's block of an AllGather into every rank's output
// (its own included, unless in place), piece by piece, each piece read
// once: a rank reads its block once, where pulling the peers' blocks
// reads every block once per rank: with two ranks each rank reads 4 MiB
// rather than 8 of an 8 MiB call, and writes as many. (Under load the
// copy of such a call took 562 µs against 689 pulling, per-call medians
// of 5 alternated runs of hcomm perf -registered; BENCHMARKS.md.) Large blocks
// are written around the caches (r.ntMin), as the pulled ones are.
func (r *Registry) push(z *Path, k *Call) error {
	me, n := z.Rank, z.Size
	off, l := blk(k, me)
	src := k.In
	if k.InPlace {
		src = k.Out[off : off+l]
	}
	if len(src) < l {
		return invalid("the input of %d bytes is shorter than the block of %d", len(src), l)
	}
	src = src[:l]
	dsts := r.dsts[:0]
	for i := 1; i < n; i++ {
		d, err := r.peer((me+i)%n, true, off, l)
		if err != nil {
			return err
		}
		dsts = append(dsts, d)
	}
	if !k.InPlace {
		dsts = append(dsts, k.Out[off:off+l])
	}
	defer clear(dsts) // keep no peer's memory alive
	if r.Split != nil {
		for _, d := range dsts {
			r.copy(d, src)
		}
		return nil
	}
	nt := l >= r.ntMin
	for lo := 0; lo < l; lo += pushPiece {
		hi := min(lo+pushPiece, l)
		for _, d := range dsts {
			if nt {
				reduce.CopyStream(d[lo:hi], src[lo:hi])
			} else {
				copy(d[lo:hi], src[lo:hi])
			}
		}
	}
	return nil
}

// ownBlock copies the block of an AllGather or AllToAll that this rank
// takes from its own input (nothing for the other collectives, or in
// place): only this rank's memory, so it may come after this rank has
// told the peers it is done with theirs.
func (r *Registry) ownBlock(z *Path, k *Call) error {
	me := z.Rank
	switch k.Coll {
	case sched.AllGather:
		if !k.InPlace && !z.push {
			off, l := blk(k, me)
			r.copy(k.Out[off:off+l], k.In)
		}
	case sched.AllToAll:
		off, l, at := 0, len(k.In)/z.Size, me*(len(k.In)/z.Size)
		if k.Spec != nil {
			es := k.DT.Size()
			l, off, at = k.Spec.Matrix[me][me]*es, k.Spec.RecvDispl(me, me)*es, 0
		} else {
			off = at
		}
		src, err := r.peer(me, false, at, l)
		if err != nil {
			return err
		}
		r.copy(k.Out[off:off+l], src)
	}
	return nil
}

// Copy copies a block of the call's output from a peer's buffer; large
// blocks are written around the caches (reduce.StreamMin).
func Copy(dst, src []byte) {
	if len(dst) >= reduce.StreamMin {
		reduce.CopyStream(dst, src)
		return
	}
	copy(dst, src)
}

// seg is rank p's segment [lo, hi) of an n-byte AllReduce over size ranks
// of es-byte elements.
func seg(size, n, es, p int) (lo, hi int) {
	elems := n / es
	return elems * p / size * es, elems * (p + 1) / size * es
}

// reduce reduces bytes [off, off+len(dst)) of every rank's input into
// dst, starting with this rank's own (dst may be exactly that range of
// the input: in place). A large reduction is split over the copy engine
// (Split): each part reduces its bytes of every input.
func (r *Registry) reduce(z *Path, k *Call, off int, dst []byte) error {
	// Every peer's range is checked here, once: a part of it is then in
	// range too, so the parts cannot fail.
	for i := 1; i < z.Size; i++ {
		if _, err := r.peer((z.Rank+i)%z.Size, false, off, len(dst)); err != nil {
			return err
		}
	}
	r.red = reduction{r: r, z: z, k: k, off: off, dst: dst, stream: len(dst) >= reduce.StreamMin}
	if r.Split != nil {
		r.Split.Run(len(dst), &r.red)
	} else {
		r.red.Part(0, len(dst))
	}
	r.red = reduction{} // keep no memory alive
	return nil
}

// reduction is one call's reduction, done in parts (copyeng.Parter).
type reduction struct {
	r      *Registry
	z      *Path
	k      *Call
	off    int
	dst    []byte
	stream bool // the last pass writes around the caches (the whole result is large)
}

// Part reduces bytes [lo, hi) of the reduction's range. The range was
// checked as a whole (reduce).
func (x *reduction) Part(lo, hi int) {
	n, me, k := x.z.Size, x.z.Rank, x.k
	dst := x.dst[lo:hi]
	for i := 1; i < n; i++ {
		src, err := x.r.peer((me+i)%n, false, x.off+lo, hi-lo)
		if err != nil {
			panic("zcopy: a part of a checked range is out of range: " + err.Error())
		}
		a := dst
		if i == 1 {
			a = k.In[x.off+lo : x.off+hi]
		}
		if x.stream && i == n-1 {
			// The last pass writes the result, which nothing here reads
			// again soon: around the caches.
			reduce.ApplyStream(k.DT, k.Op, dst, a, src)
		} else {
			reduce.Apply(k.DT, k.Op, dst, a, src)
		}
	}
}

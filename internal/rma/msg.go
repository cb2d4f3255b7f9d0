package rma

import (
	"context"
	"fmt"
	"runtime"

	"github.com/hcomm-go/hcomm/internal/copyeng"
	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/transport"
)

// sendRows sends rows rows of n bytes of b (rows pitch apart), each in
// messages of at most chunk bytes.
func (w *Window) sendRows(ctx context.Context, q *peer, b []byte, pitch, rows, n int) error {
	for r := range rows {
		row := b[r*pitch : r*pitch+n]
		for off := 0; off < n; off += w.chunk {
			if err := w.t.Send(ctx, q.rank, &w.fp, row[off:min(off+w.chunk, n)]); err != nil {
				return err
			}
		}
	}
	return nil
}

// recvRows is sendRows' counterpart, on t (the window's transport, or its
// reply path for a Get's reply). A nil b drains the messages into scratch
// memory.
func (w *Window) recvRows(ctx context.Context, t transport.Transport, q *peer, b []byte, pitch, rows, n int, scratch *[]byte) error {
	for r := range rows {
		for off := 0; off < n; off += w.chunk {
			k := min(w.chunk, n-off)
			var p []byte
			if b != nil {
				p = b[r*pitch+off : r*pitch+off+k]
			} else {
				if len(*scratch) < k {
					*scratch = make([]byte, k)
				}
				p = (*scratch)[:k]
			}
			if err := t.Recv(ctx, q.rank, &w.fp, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// request sends h (and for Put the rows of loc) to q and waits for the
// reply (for Get, its rows land in loc). Up to maxOutstanding requests to
// q wait for their replies at once; the target serves them in order.
func (w *Window) request(parent context.Context, q *peer, h *header, loc []byte, locPitch int) error {
	ctx, cancel := w.withTimeout(parent)
	defer cancel()
	var slot uint8
	select {
	case slot = <-q.slots:
	case <-q.lostCh:
		return *q.lost.Load()
	case <-ctx.Done():
		return w.ctxErr(parent, ctx)
	}
	// The slot goes back once the progress goroutine can no longer
	// touch it (the reply came, or failed withdrew it).
	defer func() { q.slots <- slot }()
	raceSync()
	defer raceSync()
	pd := &q.pds[slot]
	select {
	case <-pd.done: // a status a withdrawn request left behind
	default:
	}
	q.pmu.Lock()
	q.reqSeq++
	h.req = q.reqSeq*maxOutstanding + uint64(slot)
	pd.req, pd.loc, pd.locPitch, pd.rows, pd.n = h.req, nil, 0, 0, 0
	if h.op == opGet {
		pd.loc, pd.locPitch = loc, locPitch
		pd.rows, pd.n = h.payloadRows()
	}
	q.pend[slot] = pd
	q.pmu.Unlock()

	var hb [headerSize]byte
	h.encode(hb[:])
	rows, n := h.payloadRows()
	q.sendWait.Add(1)
	q.sendMu.Lock()
	q.sendWait.Add(-1)
	if ctx.Err() != nil {
		// Nothing of this request went out: the stream to q is as it
		// was, and the window stays usable.
		q.sendMu.Unlock()
		return w.failed(q, pd, w.ctxErr(parent, ctx))
	}
	err := w.t.Send(ctx, q.rank, &w.fp, hb[:])
	if err == nil && h.op != opGet {
		err = w.sendRows(ctx, q, loc, locPitch, rows, n)
	}
	q.sendMu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			err = w.ctxErr(parent, ctx)
		}
		// A request cut short leaves the stream to q unusable.
		w.poison(err)
		return w.failed(q, pd, err)
	}
	select {
	case st := <-pd.done:
		switch st {
		case stOK:
			return nil
		case stBounds:
			return invalid("window %d: target %d refused offset %d length %d as outside its registration", w.id, q.rank, h.off, h.n)
		case stStale:
			return fmt.Errorf("window %d: target %d does not know this window (closed or stale): %w", w.id, q.rank, errs.ErrInvalidArgument)
		default:
			return invalid("window %d: target %d refused signal %d", w.id, q.rank, h.sig)
		}
	case <-q.lostCh:
		return w.failed(q, pd, *q.lost.Load())
	case <-ctx.Done():
		// The reply may still come and write into loc: stop the
		// window's traffic before giving loc back.
		err := w.ctxErr(parent, ctx)
		w.poison(err)
		return w.failed(q, pd, err)
	}
}

// failed withdraws pd and returns err. Once it returns, the progress
// goroutine no longer writes into pd's buffer.
func (w *Window) failed(q *peer, pd *pending, err error) error {
	q.pmu.Lock()
	if q.pend[pd.slot] == pd {
		q.pend[pd.slot] = nil
	}
	pd.loc = nil
	q.pmu.Unlock()
	return err
}

// serve is the progress goroutine for requests and replies from q.
func (w *Window) serve(q *peer) {
	defer w.workers.Done()
	defer close(q.replies)
	if q.parts != nil {
		defer close(q.parts)
	}
	ctx := context.Background()
	var hb [headerSize]byte
	var scratch []byte
	for {
		err := w.t.Recv(ctx, q.rank, &w.fp, hb[:])
		if err == nil {
			err = w.handle(ctx, q, hb[:], &scratch)
		}
		if err != nil {
			w.lose(q, w.streamErr(q, err))
			return
		}
	}
}

// streamErr is the error that ends the stream from q.
func (w *Window) streamErr(q *peer, err error) error {
	if w.closed.Load() {
		return fmt.Errorf("window %d: %w", w.id, errs.ErrClosed)
	} else if e := w.broken.Load(); e != nil {
		return fmt.Errorf("window %d unusable after an earlier failure: %w: %w", w.id, errs.ErrAborted, *e)
	} else if _, ok := err.(*errs.PeerError); !ok {
		return &errs.PeerError{Peer: q.rank, Kind: errs.ErrPeerLost, Cause: err}
	}
	return err
}

// serveParts receives the pieces of Get replies from q on the window's
// reply path (Window.rt), which carries nothing else.
func (w *Window) serveParts(q *peer) {
	defer w.workers.Done()
	ctx := context.Background()
	var hb [headerSize]byte
	var scratch []byte
	for {
		err := w.rt.Recv(ctx, q.rank, &w.fp, hb[:])
		if err == nil {
			var h header
			if err = h.decode(hb[:]); err == nil && h.op != opPart {
				err = fmt.Errorf("%w: operation %d on the reply path", errBadHeader, h.op)
			}
			if err == nil {
				raceSync()
				err = w.part(ctx, w.rt, q, &h, &scratch)
				raceSync()
			}
		}
		if err != nil {
			w.lose(q, w.streamErr(q, err))
			return
		}
	}
}

// handle processes one header from q. An error ends q's stream.
func (w *Window) handle(ctx context.Context, q *peer, hb []byte, scratch *[]byte) error {
	var h header
	if err := h.decode(hb); err != nil {
		return err
	}
	raceSync()
	defer raceSync()
	rows, n := h.payloadRows()
	if h.op == opPart {
		return w.part(ctx, w.t, q, &h, scratch)
	}
	if h.op == opReply {
		q.pmu.Lock()
		defer q.pmu.Unlock()
		pd := q.pend[h.req%maxOutstanding]
		if pd == nil || pd.req != h.req {
			// A reply nobody awaits: drain its payload.
			return w.recvRows(ctx, w.t, q, nil, 0, rows, n, scratch)
		}
		if rows > 0 {
			if pd.loc == nil || !fits(pd.loc, pd.locPitch, rows, n) {
				return fmt.Errorf("%w: reply of %d rows of %d bytes to a request that wants none or fewer", errBadHeader, rows, n)
			}
			if err := w.recvRows(ctx, w.t, q, pd.loc, pd.locPitch, rows, n, scratch); err != nil {
				return err
			}
		}
		q.pend[pd.slot] = nil
		pd.loc = nil
		pd.done <- h.status
		return nil
	}
	st := w.validate(&h)
	rp := reply{h: header{op: opReply, status: st, win: h.win, nonce: h.nonce, req: h.req}}
	switch h.op {
	case opPut, opPutSignal:
		var dst []byte
		if st == stOK {
			dst = w.mem[h.off:]
		}
		if err := w.recvRows(ctx, w.t, q, dst, int(h.pitch), rows, n, scratch); err != nil {
			return err
		}
		// The requester goes on once the reply reaches it, and may
		// then tell this process's goroutines (through a barrier, over
		// the network) that the bytes are there. The race detector
		// learns that ordering only from raceMu, so the bytes must be
		// published to it before the reply can leave: the deferred
		// raceSync runs after the reply was sent, too late (the data
		// race once seen in TestWindowMultiHost).
		raceSync()
		if st == stOK && h.op == opPutSignal {
			signal(w.seg, int(h.sig), h.add)
		}
	case opGet:
		if st == stOK && rows > 0 {
			rp.h.rows, rp.h.n, rp.h.pitch = h.rows, h.n, h.pitch
			rp.src = w.mem[h.off:]
		}
	}
	// An answer without payload goes out from here when the transport
	// can send it without waiting for anybody (a blocking send could wait
	// for the peer's progress goroutine, which may be sending to us);
	// otherwise the replier sends it.
	if rp.src == nil {
		if e, ok := w.t.(transport.Eager); ok && q.sendMu.TryLock() {
			var hb [headerSize]byte
			rp.h.encode(hb[:])
			sent, err := e.TrySend(ctx, q.rank, &w.fp, hb[:])
			q.sendMu.Unlock()
			if err != nil {
				return err
			}
			if sent {
				return nil
			}
		}
	}
	ch := q.replies
	if rp.src != nil && q.parts != nil {
		ch = q.parts // a Get's reply, on the reply path
	}
	select {
	case ch <- rp:
		return nil
	case <-q.lostCh:
		return *q.lost.Load()
	}
}

// part receives a piece of a Get's reply from q on t.
func (w *Window) part(ctx context.Context, t transport.Transport, q *peer, h *header, scratch *[]byte) error {
	k := int(h.n)
	if k > w.chunk {
		return fmt.Errorf("%w: reply piece of %d bytes, chunks are %d", errBadHeader, k, w.chunk)
	}
	q.pmu.Lock()
	defer q.pmu.Unlock()
	pd := q.pend[h.req%maxOutstanding]
	if pd == nil || pd.req != h.req {
		// A reply nobody awaits: drain the piece.
		return w.recvRows(ctx, t, q, nil, 0, 1, k, scratch)
	}
	if pd.loc == nil || pd.n <= 0 {
		return fmt.Errorf("%w: reply piece to a request that wants none", errBadHeader)
	}
	r, o := h.off/uint64(pd.n), int(h.off%uint64(pd.n))
	if r >= uint64(pd.rows) || o+k > pd.n {
		return fmt.Errorf("%w: reply piece at %d of %d bytes outside %d rows of %d bytes", errBadHeader, h.off, k, pd.rows, pd.n)
	}
	at := int(r)*pd.locPitch + o
	if at+k > len(pd.loc) {
		return fmt.Errorf("%w: reply piece at %d of %d bytes outside the destination", errBadHeader, h.off, k)
	}
	if err := w.recvRows(ctx, t, q, pd.loc[at:at+k], 0, 1, k, scratch); err != nil {
		return err
	}
	if h.add == 1 {
		q.pend[pd.slot] = nil
		pd.loc = nil
		pd.done <- stOK
	}
	return nil
}

// fits reports whether rows rows of n bytes at pitch fit in b.
func fits(b []byte, pitch, rows, n int) bool {
	return copyeng.InBounds(0, rows, n, pitch, len(b))
}

// validate checks a request from a peer against this rank's registration.
func (w *Window) validate(h *header) uint8 {
	if h.win != w.id || h.nonce != w.nonce {
		return stStale
	}
	if h.op == opPutSignal && h.sig >= NumSignals {
		return stBadSignal
	}
	rows := max(int(h.rows), 1)
	if h.off > uint64(len(w.mem)) || h.pitch > uint64(len(w.mem)) ||
		!copyeng.InBounds(int(h.off), rows, int(h.n), int(h.pitch), len(w.mem)) {
		return stBounds
	}
	return stOK
}

// sendParts sends a Get's reply rp to q as pieces (opPart): on the
// window's reply path if it has one, else on its transport, letting
// requests waiting to go to q out between them.
func (w *Window) sendParts(ctx context.Context, q *peer, rp *reply) error {
	var hb [headerSize]byte
	rows, n := rp.h.payloadRows()
	pitch := int(rp.h.pitch)
	ph := header{op: opPart, win: rp.h.win, nonce: rp.h.nonce, req: rp.h.req}
	// Only this goroutine sends on the reply path to q; the window's
	// transport is shared with the requests, under sendMu.
	t, shared := w.rt, w.rt == nil
	if shared {
		t = w.t
	}
	for r := range rows {
		for o := 0; o < n; o += w.chunk {
			k := min(w.chunk, n-o)
			ph.off, ph.n = uint64(r*n+o), uint64(k)
			if r == rows-1 && o+k == n {
				ph.add = 1
			}
			ph.encode(hb[:])
			piece := rp.src[r*pitch+o : r*pitch+o+k]
			if shared {
				q.sendMu.Lock()
			}
			err := t.Send(ctx, q.rank, &w.fp, hb[:])
			if err == nil {
				err = t.Send(ctx, q.rank, &w.fp, piece)
			}
			if shared {
				q.sendMu.Unlock()
			}
			if err != nil {
				return err
			}
			if shared && q.sendWait.Load() > 0 {
				runtime.Gosched()
			}
		}
	}
	return nil
}

// replier sends the replies the progress goroutine queued for q on ch
// (q.replies, or q.parts: the Get replies for the reply path).
func (w *Window) replier(q *peer, ch chan reply) {
	defer w.workers.Done()
	ctx := context.Background()
	var hb [headerSize]byte
	for rp := range ch {
		raceSync()
		var err error
		if rp.src != nil {
			err = w.sendParts(ctx, q, &rp)
		} else {
			rp.h.encode(hb[:])
			q.sendMu.Lock()
			err = w.t.Send(ctx, q.rank, &w.fp, hb[:])
			q.sendMu.Unlock()
		}
		raceSync()
		if err != nil {
			w.lose(q, &errs.PeerError{Peer: q.rank, Kind: errs.ErrPeerLost, Cause: err})
			for range ch { // let serve finish
			}
			return
		}
	}
}

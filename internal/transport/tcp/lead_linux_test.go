package tcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// trade sends n rounds of a message each way over the pair of trs,
// cycling through a small, a striped and a large size, from message *seq
// on.
func trade(ctx context.Context, t *testing.T, trs []*Transport, seq *int, n int) {
	t.Helper()
	for range n {
		for from := range 2 {
			sendOne(ctx, t, trs, from, *seq, []int{100, stripeMin, 1 << 20}[*seq%3])
			*seq++
		}
	}
}

// sendLead returns rank 0's send lead.
func (w *leadWorld) sendLead() *conn {
	w.pr.mu.Lock()
	defer w.pr.mu.Unlock()
	return w.pr.sl
}

// TestLeadMoveAfterDrainedPings: the idle pings rank 1 discards at the
// head of path 1's connection (drainPings) count as read there, so that
// when the lead stream, once moved onto that connection, moves again
// (to path 0 dialed again), rank 1 resumes the old stream at the offset
// rank 0's host acknowledged, which counts the pings.
func TestLeadMoveAfterDrainedPings(t *testing.T) {
	// No pinger: the test writes and discards the pings itself.
	w := newLeadWorld(t, func(tr *Transport) { tr.pingEvery = -1 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pr1 := w.trs[1].peers[0]
	const pings = 3
	c0 := w.pr.sview[w.pr.paths[1].conns[0].pos]
	for range pings {
		if _, err := c0.write(&wire.FrameHeader{Type: wire.FramePing}, nil); err != nil {
			t.Fatal(err)
		}
	}
	c1 := pr1.rview[pr1.paths[1].conns[0].pos]
	for queued(t, c1.nc) < pings*wire.FrameHeaderSize {
		if ctx.Err() != nil {
			t.Fatalf("rank 1 did not receive the pings: %d bytes queued", queued(t, c1.nc))
		}
		time.Sleep(time.Millisecond)
	}
	c1.rmu.Lock()
	before := c1.rread
	c1.drainPings()
	read, left := c1.rread-before, queued(t, c1.nc)
	c1.rmu.Unlock()
	if read != pings*wire.FrameHeaderSize || left != 0 {
		t.Fatalf("discarding the pings counted %d bytes as read and left %d in the socket; want %d and 0",
			read, left, pings*wire.FrameHeaderSize)
	}
	// The idle pinger and the lead watch ask on every tick, for as long
	// as a pair lives: neither allocates.
	if n := testing.AllocsPerRun(100, func() {
		c1.rmu.Lock()
		c1.drainPings()
		c1.rmu.Unlock()
		if q, ok := c1.front.queued(); !ok || q != 0 {
			t.Fatalf("queued = %d, %v; want 0, true", q, ok)
		}
	}); n != 0 {
		t.Errorf("draining pings and asking what is queued allocate %v times, want 0", n)
	}

	// The lead moves to path 1, which rank 1 joins.
	w.stall.Store(true)
	w.moved(ctx, t)
	w.stall.Store(false)
	seq := 0
	trade(ctx, t, w.trs, &seq, 3)
	if sl := w.sendLead(); sl.path.idx != 1 {
		t.Fatalf("the lead moved to path %d, want 1", sl.path.idx)
	}
	// Path 0, dialed again, back in use both ways.
	for back := false; !back; {
		if ctx.Err() != nil {
			t.Fatalf("path 0 did not come back:\n%v\n%s", w.trs[0].Paths(), w.logs.String())
		}
		trade(ctx, t, w.trs, &seq, 1)
		for _, s := range w.trs[0].Paths() {
			back = back || s.Path == 0 && !s.Retired && s.Gen > 0
		}
	}
	trade(ctx, t, w.trs, &seq, 3)

	// The lead moves off path 1 (where rank 1 discarded pings) to path 0.
	w.old.Store(w.sendLead())
	w.stall.Store(true)
	w.moved(ctx, t)
	w.stall.Store(false)
	trade(ctx, t, w.trs, &seq, 3)
	if sl := w.sendLead(); sl.path.idx != 0 {
		t.Fatalf("the lead moved to path %d, want 0", sl.path.idx)
	}
	joins := 0
	for _, l := range strings.Split(w.logs.String(), "\n") {
		if strings.Contains(l, "peer moved the lead stream") && strings.Contains(l, "peer=0") {
			joins++
		}
	}
	if joins != 2 {
		t.Errorf("rank 1 joined %d moves of rank 0's lead, want 2:\n%s", joins, w.logs.String())
	}
}

// TestLeadMoveWriteFails: when a move's lead frame cannot be written on the
// path the lead moves to, the lead stays on its path, the path refused is
// retired (and dialed again), and the lead moves once that path is back;
// messages keep arriving whole both ways, and the pair does not fail.
func TestLeadMoveWriteFails(t *testing.T) {
	w := newLeadWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var refused atomic.Pointer[conn]
	tried := make(chan struct{})
	refuse := func(next *conn) {
		if refused.CompareAndSwap(nil, next) {
			// As if its path had just stopped: the write is refused
			// before a byte goes out.
			next.retireWrite()
			close(tried)
		}
	}
	w.moveTo.Store(&refuse)
	w.stall.Store(true)
	select {
	case <-tried:
	case <-ctx.Done():
		t.Fatal("no move of the lead was tried")
	}
	seq := 0
	for w.sendLead() == w.old.Load() {
		if ctx.Err() != nil {
			t.Fatalf("the lead did not move:\n%v\n%s", w.trs[0].Paths(), w.logs.String())
		}
		trade(ctx, t, w.trs, &seq, 1)
	}
	w.stall.Store(false)
	trade(ctx, t, w.trs, &seq, 3)
	if sl := w.sendLead(); sl.path.idx != 1 || sl == refused.Load() {
		t.Errorf("the lead is on path %d (the refused connection: %v); want path 1 dialed again", sl.path.idx, sl == refused.Load())
	}
	logs := w.logs.String()
	for _, want := range []string{"the lead stream could not move onto it", "the lead stream moves to another path", "peer moved the lead stream"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %q:\n%s", want, logs)
		}
	}
	if err := w.pr.err(); err != nil {
		t.Fatalf("the pair failed: %v", err)
	}
}

// TestLeadMoveCut: a move whose lead frame is cut short (its connection
// fails in the middle of the write) fails the pair rather than leave the
// peer joining a stream that never comes: rank 0's calls end with
// ErrPeerLost naming the cut, and rank 1's receives end with ErrPeerLost,
// not a hang.
func TestLeadMoveCut(t *testing.T) {
	var cutAt atomic.Pointer[conn]
	w := newLeadWorld(t, func(tr *Transport) {
		if tr.Rank() == 0 {
			tr.testCutMove = func(next *conn) int64 {
				cutAt.Store(next)
				return wire.FrameHeaderSize + 10 // the header and part of the replay
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Three small messages, taken as unacknowledged: the move replays them.
	w.pr.smu.Lock()
	base := w.pr.sl.wroteAt()
	w.pr.smu.Unlock()
	w.acked.Store(base)
	w.freeze.Store(true)
	const small = 100
	for seq := range 3 {
		if err := sendMsg(ctx, w.trs[0], 1, seq, small); err != nil {
			t.Fatal(err)
		}
	}
	w.stall.Store(true)
	for w.pr.err() == nil {
		if ctx.Err() != nil {
			t.Fatalf("the pair did not fail:\n%s", w.logs.String())
		}
		time.Sleep(time.Millisecond)
	}
	if c := cutAt.Load(); c == nil || c.path.idx != 1 {
		t.Fatalf("the lead frame was cut on %v, want path 1's connection", c)
	}
	err := sendMsg(ctx, w.trs[0], 1, 3, small)
	if !errors.Is(err, errs.ErrPeerLost) || !strings.Contains(err.Error(), "lead frame was cut") {
		t.Fatalf("rank 0's Send after the cut: %v, want ErrPeerLost naming the cut lead frame", err)
	}
	// Rank 1 may read the messages its host had; then its receive fails.
	for seq := 0; ; seq++ {
		err := recvMsg(ctx, w.trs[1], 0, seq, small)
		if err == nil && seq < 3 {
			continue
		}
		if !errors.Is(err, errs.ErrPeerLost) {
			t.Fatalf("rank 1's receive %d: %v, want ErrPeerLost", seq, err)
		}
		break
	}
}

// TestPreReadKeep: what a receive waiting on an idle lead does with a
// stripe at the front of another path's connection. A stripe naming the
// call of a message too small to be striped is a later message's of that
// call, never the awaited one's; it is kept only when asked, and one
// larger than a pair keeps is left in place. The kept stripes go when the
// pair fails.
func TestPreReadKeep(t *testing.T) {
	w := newLeadWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr1 := w.trs[1].peers[0]
	c0 := w.pr.sview[w.pr.paths[1].conns[0].pos]
	c1 := pr1.rview[pr1.paths[1].conns[0].pos]
	fp := fpFor(7, 50<<10)
	stripe := make([]byte, 1000)
	fill(stripe, 0, 7)
	// A later message's stripe at offset 0: it would fit the awaited
	// 50 KiB message, whose fingerprint it bears.
	if _, err := c0.write(&wire.FrameHeader{Type: wire.FrameStripe, Fingerprint: fp, Len: uint64(len(stripe)), Total: stripeMin}, stripe); err != nil {
		t.Fatal(err)
	}
	for queued(t, c1.nc) < wire.FrameHeaderSize+len(stripe) {
		if ctx.Err() != nil {
			t.Fatal("rank 1 did not receive the stripe")
		}
		time.Sleep(time.Millisecond)
	}
	preRead := func(p []byte, keep bool) {
		t.Helper()
		pr1.rl.rmu.Lock()
		defer pr1.rl.rmu.Unlock()
		if err := pr1.preRead(ctx, &fp, p, keep); err != nil {
			t.Fatal(err)
		}
	}
	p := make([]byte, 50<<10)
	preRead(p, false)
	if pr1.rpre != 0 || len(pr1.rkept) != 0 || queued(t, c1.nc) == 0 {
		t.Fatalf("a stripe was read for a %d-byte message, which is never striped (read before: %#x, kept %d)", len(p), pr1.rpre, len(pr1.rkept))
	}
	preRead(p, true)
	if pr1.rpre != 0 || len(pr1.rkept) != 1 || !bytes.Equal(pr1.rkept[0].data, stripe) {
		t.Fatalf("the stripe was not kept for a later message (read before: %#x, kept %d)", pr1.rpre, len(pr1.rkept))
	}
	// Its path moved to a new generation (redial.go) before a message
	// took it: the next header naming the connection does not take it.
	pos := pr1.rkept[0].pos
	cur := pr1.rview[pos]
	pr1.rview[pos] = &conn{pos: pos, idx: cur.idx, path: cur.path}
	h := wire.FrameHeader{Type: wire.FrameData, Fingerprint: fp, Total: stripeMin, Len: stripeMin - uint64(len(stripe)), Paths: 1 << cur.path.idx}
	err := pr1.useKept(&h, []*conn{pr1.rview[pos]}, make([]byte, stripeMin))
	pr1.rview[pos] = cur
	if !errors.Is(err, errProtocol) || pr1.rpre != 0 {
		t.Fatalf("a stripe kept from a generation left was taken: %v (read before: %#x)", err, pr1.rpre)
	}

	// A stripe header claiming more than a pair keeps: left in place,
	// nothing allocated for it.
	if _, err := c0.write(&wire.FrameHeader{Type: wire.FrameStripe, Fingerprint: fp, Offset: stripeMin, Len: keptMax, Total: 2 * keptMax}, nil); err != nil {
		t.Fatal(err)
	}
	for queued(t, c1.nc) < wire.FrameHeaderSize {
		if ctx.Err() != nil {
			t.Fatal("rank 1 did not receive the stripe header")
		}
		time.Sleep(time.Millisecond)
	}
	pr1.rkept[0].pos = pr1.rl.pos // as if kept from another connection
	preRead(p, true)
	if len(pr1.rkept) != 1 || queued(t, c1.nc) != wire.FrameHeaderSize {
		t.Fatalf("a stripe beyond what a pair keeps was read: kept %d, %d bytes left", len(pr1.rkept), queued(t, c1.nc))
	}
	if !strings.Contains(w.logs.String(), "larger than what a pair keeps") {
		t.Errorf("no WARN for the stripe left in place:\n%s", w.logs.String())
	}

	pr1.fail(errors.New("test: the pair fails"))
	pr1.recv.ifIdle(func() {
		if pr1.rkept != nil {
			t.Errorf("%d kept stripes outlive the pair", len(pr1.rkept))
		}
	})
}

// TestPreReadLeadCame: a receive woken for a stripe ahead while its lead
// was idle, whose awaited message came whole on the lead before the
// stripes were looked at, and after it a stripe of the next message of
// the same call (which a sender puts out only once the awaited header is
// in this rank's socket). preRead leaves that stripe in place, as a
// later message's, and the receive takes the message from the lead.
// (Read as the awaited one's, the receive failed a healthy pair.)
func TestPreReadLeadCame(t *testing.T) {
	w := newLeadWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr1 := w.trs[1].peers[0]
	c0 := w.pr.sview[w.pr.paths[1].conns[0].pos]
	c1 := pr1.rview[pr1.paths[1].conns[0].pos]
	const size = 100 << 10
	fp := fpFor(1, size)
	pr1.rl.rmu.Lock()
	if !pr1.rl.idle() {
		pr1.rl.rmu.Unlock()
		t.Fatal("rank 1's lead is not idle before the test")
	}
	// The awaited message, whole on the lead: its header is in rank 1's
	// socket before the next message's stripe goes out.
	msg := make([]byte, size)
	fill(msg, 0, 1)
	if _, err := w.pr.sl.write(&wire.FrameHeader{Type: wire.FrameData, Fingerprint: fp, Len: size, Total: size}, msg); err != nil {
		t.Fatal(err)
	}
	for queued(t, pr1.rl.nc) < wire.FrameHeaderSize {
		if ctx.Err() != nil {
			t.Fatal("rank 1 did not receive the message's header")
		}
		time.Sleep(time.Millisecond)
	}
	stripe := make([]byte, 1000)
	if _, err := c0.write(&wire.FrameHeader{Type: wire.FrameStripe, Fingerprint: fp, Len: uint64(len(stripe)), Total: 2 * size}, stripe); err != nil {
		t.Fatal(err)
	}
	for queued(t, c1.nc) < wire.FrameHeaderSize+len(stripe) {
		if ctx.Err() != nil {
			t.Fatal("rank 1 did not receive the stripe")
		}
		time.Sleep(time.Millisecond)
	}
	p := make([]byte, size)
	err := pr1.preRead(ctx, &fp, p, false)
	rpre := pr1.rpre
	pr1.rl.rmu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if rpre != 0 || queued(t, c1.nc) != wire.FrameHeaderSize+len(stripe) {
		t.Fatalf("the next message's stripe was read as the awaited one's (read before: %#x)", rpre)
	}
	if err := w.trs[1].Recv(ctx, 0, &fp, p); err != nil {
		t.Fatalf("the message whole on the lead: %v", err)
	}
	if err := check(p, 0, 1); err != nil {
		t.Fatal(err)
	}
}

// TestRepairOfPreRead: a message striped over three paths whose path-1
// stripe rank 1 read before the header (preRead); the sender then
// repairs path 1 on the lead (its acknowledgements were lost with the
// path), while path 2's stripe is still due. Rank 1 takes the repair in
// place of the stripe it read ahead and ends with the message whole.
// (It refused the repair, a path "the message does not travel on", and
// failed the pair.) Rank 0's frames are written by hand, in the order a
// sender writes them in that case.
func TestRepairOfPreRead(t *testing.T) {
	trs, _ := multiPathWorld(t, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d", "127.0.0.3:%d")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runAll(t, trs, func(tr *Transport) error { return barrier2(ctx, tr, 1-tr.Rank()) })
	pr0, pr1 := trs[0].peers[1], trs[1].peers[0]
	if len(pr0.paths) != 3 {
		t.Fatalf("%d paths, want 3", len(pr0.paths))
	}
	const seq, part = 5, stripeMin
	const total = 3 * part
	fp := fpFor(seq, total)
	msg := make([]byte, total)
	fill(msg, 0, seq)
	out := func(i int) *conn { return pr0.sview[pr0.paths[i].conns[0].pos] }
	in := func(i int) *conn { return pr1.rview[pr1.paths[i].conns[0].pos] }
	lead, leadIn := pr0.sl, pr1.rl
	write := func(c *conn, h wire.FrameHeader, b []byte) {
		t.Helper()
		if _, err := c.write(&h, b); err != nil {
			t.Fatal(err)
		}
	}
	// until waits for cond, failing if rank 1's receive ends first.
	done := make(chan error, 1)
	until := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case err := <-done:
				t.Fatalf("rank 1's receive ended before %s: %v", what, err)
			default:
			}
			if ctx.Err() != nil {
				t.Fatalf("rank 1: no %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	go func() {
		p := make([]byte, total)
		err := trs[1].Recv(ctx, 0, &fp, p)
		if err == nil {
			err = check(p, 0, seq)
		}
		done <- err
	}()
	until("wait for a header", pr1.rhdrWait.Load)
	// Path 1's stripe first; rank 1 reads it ahead of the header, woken
	// by its watch or as by it (rstripe, pokeLead).
	read := in(1).path.received.Load()
	write(out(1), wire.FrameHeader{Type: wire.FrameStripe, Fingerprint: fp, Offset: part, Len: part}, msg[part:2*part])
	until("read ahead of the stripe on path 1", func() bool {
		if in(1).path.received.Load() >= read+part {
			return true
		}
		pr1.rstripe.Store(true)
		pr1.recv.pokeLead()
		return false
	})
	// The header and first stripe, then the repair of path 1, on the
	// lead; path 2's stripe only once rank 1 has read the repair.
	write(lead, wire.FrameHeader{Type: wire.FrameData, Fingerprint: fp, Paths: 1<<0 | 1<<1 | 1<<2, Len: part, Total: total}, msg[:part])
	write(lead, wire.FrameHeader{Type: wire.FrameStripe, Fingerprint: fp, Paths: 1 << 1, Offset: part, Len: part}, msg[part:2*part])
	until("read of the repair", func() bool { return queued(t, leadIn.nc) == 0 })
	write(out(2), wire.FrameHeader{Type: wire.FrameStripe, Fingerprint: fp, Offset: 2 * part, Len: part}, msg[2*part:])
	if err := <-done; err != nil {
		t.Fatalf("rank 1: %v", err)
	}
}

// TestLeadMoveTwice: the lead's path and the path its lead moves onto stop
// together (three paths, the third survives), so the lead moves a second
// time before the peer's host acknowledged the first move's lead frame.
// The second lead frame resumes the lead stream where the first did
// (offsets count the lead stream's bytes across moves), so rank 1 joins
// it whether it never saw the first lead frame (lost with its path), read
// it without rank 0 seeing the acknowledgement, or holds its header and
// must join it first. A large message sent on the middle lead has its
// first stripe there, which rank 1 must know though it never read that
// lead. Every message arrives whole and in order, and the pair does not
// fail.
func TestLeadMoveTwice(t *testing.T) {
	for _, tt := range []struct {
		name  string
		lose  uint   // the lead frames (bit k: of move k+1) that never reach rank 1
		acked uint64 // of a lead frame on a path that stops, taken as acknowledged
	}{
		{"first lead frame lost", 1, 0},
		{"first lead frame read, unacknowledged", 0, 0},
		{"first lead frame's header acknowledged", 0, wire.FrameHeaderSize + 20},
	} {
		t.Run(tt.name, func(t *testing.T) { leadMoveChain(t, 1, 2, tt.lose, tt.acked, false) })
	}
}

// TestLeadMoveThrice: the lead's path and the two paths it moves onto in
// turn stop together (four paths, the fourth survives), so the lead moves
// three times in a row, each lead frame resuming where the first did.
// Rank 1 joins the third whether it never saw either of the first two
// (both lost with their paths: two leads it never joined), joined the
// first only, or the second only; the middle leads' first stripes are
// placed by the offsets where those leads began. Every message arrives
// whole and in order, and the pair does not fail. In the last case the
// first move comes between messages, so the large message's header and
// first stripe go on the first middle lead, which rank 1 never joins: it
// knows that connection by the path the header names (First), not by
// where the lead it left began.
func TestLeadMoveThrice(t *testing.T) {
	for _, tt := range []struct {
		name    string
		lose    uint
		between bool
	}{
		{"first and second lead frames lost", 3, false},
		{"first read, second lost", 2, false},
		{"first lost, second read", 1, false},
		{"first move between messages, both lost", 3, true},
	} {
		t.Run(tt.name, func(t *testing.T) { leadMoveChain(t, 1, 3, tt.lose, 0, tt.between) })
	}
}

// TestLeadMoveSockets: two paths of two sockets; the lead's first
// connection stops during a large Send while the stripe on its path's
// second socket waits for acknowledgement: rank 1 reads that stripe only
// after the message's header, lost with the lead, so its window fills
// and the stripe never stalls by itself. The lead moves all the same (the
// watch found it stalled), the path's stripes go again on the new lead,
// every message arrives, and the path comes back.
func TestLeadMoveSockets(t *testing.T) {
	leadMoveChain(t, 2, 1, 0, 0, false)
}

// leadMoveChain runs a pair over moves+1 paths of nsocks sockets whose
// first moves paths stop at once with the lead on the first (its first
// connection's, that is): the lead moves moves times,
// each move but the last onto a path that stopped too (with acked bytes
// of what is written on it taken as acknowledged, its lead frame lost
// when bit k of lose is set, k from 0 for the first move), and lands on
// the last path. Messages small and large go across during the moves,
// then both ways once the stopped paths are back. With between, the
// first move happens after the first small message and before the large
// one (else during the large one's Send).
func leadMoveChain(t *testing.T, nsocks, moves int, lose uint, acked uint64, between bool) {
	addrs := make([]string, moves+1)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.0.%d:%%d", i+1)
	}
	trs, logs := multiPathWorld(t, 2, nsocks, addrs...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	for _, tr := range trs {
		// Only the hooks stop paths (testStall moves the lead at once
		// whatever the bound): on a loaded machine a loopback stripe
		// or ping can go unacknowledged for a second, and paths
		// retired besides the stopped ones can leave the lead nowhere
		// to go.
		tr.stallAfter = 8 * time.Second
	}
	t0 := trs[0]
	var mu sync.Mutex
	dead := map[*conn]uint64{} // rank 0's stopped connections: what their peer acknowledged
	lost := map[*conn]bool{}   // and those whose lead frame is lost
	isDead := func(c *conn) (uint64, bool) {
		mu.Lock()
		defer mu.Unlock()
		a, ok := dead[c]
		return a, ok
	}
	var nmoves atomic.Int32
	moved := make(chan struct{})
	t0.testAcked = func(c *conn, a uint64) uint64 {
		if d, ok := isDead(c); ok {
			return min(a, d)
		}
		return a
	}
	// The lead stops for the watch only once a Send waits on it, so the
	// first move happens during the large Send, as a stopped link is
	// found, not between the small Send before it and the large one
	// (where a loaded machine's scheduling would put it now and then).
	var awaiting atomic.Bool
	t0.testLeadAt = func(string) { awaiting.Store(true) }
	t0.testStall = func(c *conn) bool { _, ok := isDead(c); return ok && awaiting.Load() }
	t0.testLost = func(c *conn) bool { _, ok := isDead(c); return ok }
	t0.testMoveTo = func(next *conn) {
		k := int(nmoves.Add(1))
		if k == 1 {
			close(moved)
		}
		if k < moves {
			// The path the lead moves onto stopped with the
			// lead's.
			mu.Lock()
			if _, ok := dead[next]; !ok {
				dead[next] = next.wroteAt() + acked
				lost[next] = lose&(1<<(k-1)) != 0
			}
			mu.Unlock()
		}
	}
	t0.testLoseMove = func(next *conn) bool {
		mu.Lock()
		defer mu.Unlock()
		return lost[next]
	}
	// (A load average of 40 on 2 CPUs has stretched this chain of
	// moves, rejoins and trades past 30 s under -race.)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	runAll(t, trs, func(tr *Transport) error { return barrier2(ctx, tr, 1-tr.Rank()) })
	pr := t0.peers[1]
	if !pr.leadOK {
		t.Fatal("the pair does not move its lead: no TCP_INFO acknowledgement counts?")
	}
	const small = 100
	seq := 0
	for ; seq < 3; seq++ {
		if err := sendMsg(ctx, t0, 1, seq, small); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if err := recvMsg(ctx, trs[1], 0, i, small); err != nil {
			t.Fatal(err)
		}
	}
	// The lead's path stops with its last small frame
	// unacknowledged; what follows on it is lost.
	pr.smu.Lock()
	first := pr.sl
	mu.Lock()
	dead[first] = first.wroteAt() - (wire.FrameHeaderSize + small)
	mu.Unlock()
	awaiting.Store(false)
	pr.smu.Unlock()
	sizes := []int{small, 1 << 20, small, 8, 1 << 20, small}
	for range moves - 2 {
		sizes = append(sizes, 1<<20, small)
	}
	if between {
		awaiting.Store(true) // the watch moves the lead between Sends
	}
	errc := make(chan error, 1)
	go func() {
		for i, size := range sizes {
			if i == 1 && between {
				select {
				case <-moved:
				case <-ctx.Done():
				}
			}
			if err := sendMsg(ctx, t0, 1, seq+i, size); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	if err := recvMsg(ctx, trs[1], 0, 2, small); err != nil {
		t.Fatal(err)
	}
	for i, size := range sizes {
		if err := recvMsg(ctx, trs[1], 0, seq+i, size); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	seq += len(sizes)
	pr.mu.Lock()
	sl := pr.sl
	pr.mu.Unlock()
	if int(nmoves.Load()) < moves {
		t.Fatalf("the lead is on path %d after %d moves, want at least %d", sl.path.idx, nmoves.Load(), moves)
	}
	if sl.path.idx != moves {
		// A loaded machine may stall a live path too (a receiver not
		// scheduled for StallAfter): the lead moves again, rightly.
		t.Logf("the lead is on path %d after %d moves (path %d after %d without other stalls)", sl.path.idx, nmoves.Load(), moves, moves)
	}
	for k := range moves {
		if !logHas(logs.String(), "the lead stream moves to another path", "rank=0", fmt.Sprintf("path=%d ", k)) {
			t.Errorf("no WARN for the move off path %d", k)
		}
	}
	// Rank 1 joined the last move, and the others only if their lead
	// frames came.
	if !logHas(logs.String(), "peer moved the lead stream", "rank=1", fmt.Sprintf("path=%d ", moves-1), fmt.Sprintf("to=%d", moves)) {
		t.Errorf("rank 1 did not join the move off path %d", moves-1)
	}
	for k := 1; k < moves; k++ {
		// (A later move, after a stall of the loaded machine, may go
		// onto path k again, dialed again, off another path.)
		if lose&(1<<(k-1)) != 0 && logHas(logs.String(), "peer moved the lead stream", "rank=1", fmt.Sprintf("path=%d ", k-1), fmt.Sprintf("to=%d", k)) {
			t.Errorf("rank 1 joined a lead frame onto path %d that never came", k)
		}
	}
	mu.Lock()
	clear(dead)
	clear(lost)
	mu.Unlock()
	// Both ways, and every stopped path back in use (after two moves;
	// after three, both ways only).
	trade(ctx, t, trs, &seq, 3)
	for back := moves > 2; !back; {
		if ctx.Err() != nil {
			t.Fatalf("paths 0 to %d did not come back:\n%v", moves-1, t0.Paths())
		}
		trade(ctx, t, trs, &seq, 1)
		n := 0
		for _, s := range t0.Paths() {
			if s.Path < moves && !s.Retired && s.Gen > 0 {
				n++
			}
		}
		back = n == moves
	}
	trade(ctx, t, trs, &seq, 3)
	if err := pr.err(); err != nil {
		t.Fatalf("the pair failed: %v", err)
	}
}

// logHas reports whether a line of logs holds every one of parts.
func logHas(logs string, parts ...string) bool {
	for _, l := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestLeadMoveSkipsUntoldGeneration: rank 0's idle ping retires path 1,
// which is dialed again; rank 0 announces the new generation with a
// rejoin frame on its lead just as the lead's path stops, so the frame is
// lost with it. The lead must not move onto path 1: rank 1 reads path 1
// on the old generation and would never see a lead frame on the new one
// (the rejoin frame is in that lead frame's own replay). It moves to path
// 2, and every message arrives.
func TestLeadMoveSkipsUntoldGeneration(t *testing.T) {
	trs, logs := multiPathWorld(t, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d", "127.0.0.3:%d")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	t0 := trs[0]
	var mu sync.Mutex
	dead := map[*conn]uint64{}
	isDead := func(c *conn) (uint64, bool) {
		mu.Lock()
		defer mu.Unlock()
		a, ok := dead[c]
		return a, ok
	}
	t0.testAcked = func(c *conn, a uint64) uint64 {
		if d, ok := isDead(c); ok {
			return min(a, d)
		}
		return a
	}
	var awaiting atomic.Bool // (see leadMoveChain)
	t0.testLeadAt = func(string) { awaiting.Store(true) }
	t0.testStall = func(c *conn) bool { _, ok := isDead(c); return ok && awaiting.Load() }
	t0.testLost = func(c *conn) bool { _, ok := isDead(c); return ok }
	var armed atomic.Bool
	t0.testPingStall = func(c *conn) bool { return c.path.idx == 1 && armed.CompareAndSwap(true, false) }
	rounds := make(chan struct{}, 1)
	t0.testPinged = func(int) {
		select {
		case rounds <- struct{}{}:
		default:
		}
	}
	for _, tr := range trs {
		tr.pingEvery = 10 * time.Millisecond
		// No path but path 1 (testPingStall) and the lead's (testStall,
		// which moves it at once whatever the threshold) stops: a
		// loaded machine can leave a loopback ping unacknowledged for a
		// second, and a path 2 retired too would leave the lead nowhere
		// to go.
		tr.stallAfter = 8 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runAll(t, trs, func(tr *Transport) error { return barrier2(ctx, tr, 1-tr.Rank()) })
	pr := t0.peers[1]
	if !pr.leadOK {
		t.Fatal("the pair does not move its lead: no TCP_INFO acknowledgement counts?")
	}
	seq := 0
	trade(ctx, t, trs, &seq, 1)
	armed.Store(true)
	// Path 1 retired and its new generation up at rank 0.
	for pr.rejoinable.Load()&2 == 0 {
		select {
		case <-rounds:
		case <-ctx.Done():
			t.Fatal("path 1 was not retired and dialed again")
		}
	}
	pr.smu.Lock()
	first := pr.sl
	mu.Lock()
	dead[first] = first.wroteAt()
	mu.Unlock()
	awaiting.Store(false)
	pr.smu.Unlock()
	sizes := []int{1 << 20, 100, 1 << 20, 8}
	errc := make(chan error, 1)
	go func() {
		for i, size := range sizes {
			if err := sendMsg(ctx, t0, 1, seq+i, size); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	for i, size := range sizes {
		if err := recvMsg(ctx, trs[1], 0, seq+i, size); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	seq += len(sizes)
	if !logHas(logs.String(), "the lead stream moves to another path", "rank=0", "path=0 ", "to=2") {
		t.Fatal("the lead did not move from path 0 to path 2")
	}
	mu.Lock()
	clear(dead)
	mu.Unlock()
	trade(ctx, t, trs, &seq, 3)
	for r, tr := range trs {
		if err := tr.peers[1-r].err(); err != nil {
			t.Fatalf("rank %d: the pair failed: %v", r, err)
		}
	}
}

// TestLeadStaysWritable: the watch interrupts a stalled lead's write with
// an immediate socket deadline while a Send holds the lead (the Send is
// to move it). When the lead cannot move (no other path in use) it stays,
// and the next Send writes on it: the immediate deadline does not
// outlive the move that did not happen.
func TestLeadStaysWritable(t *testing.T) {
	trs, logs := multiPathWorld(t, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runAll(t, trs, func(tr *Transport) error { return barrier2(ctx, tr, 1-tr.Rank()) })
	seq := 0
	trade(ctx, t, trs, &seq, 1)
	pr := trs[0].peers[1]
	if !pr.leadOK {
		t.Fatal("the pair does not move its lead: no TCP_INFO acknowledgement counts?")
	}
	// Path 1 out of use, as if retired and not back: nowhere to move.
	pr.smu.Lock()
	for _, p := range pr.paths {
		if p != pr.sl.path {
			p.retired.Store(true)
		}
	}
	// What the watch does to a stalled lead a Send holds.
	pr.sstalled.Store(true)
	pr.sl.nc.SetWriteDeadline(aLongTimeAgo)
	pr.smu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- sendMsg(ctx, trs[0], 1, seq, 100) }()
	if err := recvMsg(ctx, trs[1], 0, seq, 100); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("a Send on the lead that could not move: %v", err)
	}
}

// TestLeadNowhereToMove: the lead's path stops while the pair's other path
// is retired (its idle ping stalled), so the lead has nowhere to move:
// either the path is still retired (rank 1's pinger retired it and, not
// being the pair's dialer, does not dial it again), or it was dialed again
// and its rejoin frame went on the stopped lead, so the peer reads it on
// the old generation and would never see a lead frame there. The pair
// fails with ErrPeerLost once the lead has had no acknowledgement for
// DeadAfter, as when every path to a host goes down, instead of waiting
// for the call's deadline.
func TestLeadNowhereToMove(t *testing.T) {
	for _, tt := range []struct {
		name   string
		sender int // the rank whose lead stops; its pinger retires path 1
	}{
		{"other path retired", 1},
		{"other path dialed again, untold", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			trs, logs := multiPathWorld(t, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d")
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("logs:\n%s", logs.String())
				}
			})
			from, to := trs[tt.sender], trs[1-tt.sender]
			var dead atomic.Pointer[conn] // the stopped lead: nothing written on it arrives
			var stopAt atomic.Uint64
			from.testAcked = func(c *conn, a uint64) uint64 {
				if dead.Load() == c {
					return min(a, stopAt.Load())
				}
				return a
			}
			from.testStall = func(c *conn) bool { return dead.Load() == c }
			from.testLost = func(c *conn) bool { return dead.Load() == c }
			var armed atomic.Bool
			from.testPingStall = func(c *conn) bool { return c.path.idx == 1 && armed.CompareAndSwap(true, false) }
			rounds := make(chan struct{}, 1)
			from.testPinged = func(int) {
				select {
				case rounds <- struct{}{}:
				default:
				}
			}
			for _, tr := range trs {
				tr.pingEvery = 10 * time.Millisecond
				// Only the hooks stop paths: a loaded machine can
				// leave a loopback ping unacknowledged for a second.
				tr.stallAfter = 8 * time.Second
			}
			from.deadAfter = 3 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
			defer cancel()
			runAll(t, trs, func(tr *Transport) error { return barrier2(ctx, tr, 1-tr.Rank()) })
			pr := from.peers[1-tt.sender]
			if !pr.leadOK {
				t.Fatal("the pair does not move its lead: no TCP_INFO acknowledgement counts?")
			}
			seq := 0
			trade(ctx, t, trs, &seq, 1)
			armed.Store(true)
			for {
				// Path 1 retired, and (at the dialer) dialed again.
				pr.mu.Lock()
				_, g := pr.lastGen(1)
				pr.mu.Unlock()
				if pr.paths[1].retired.Load() && (tt.sender == 1 || g != nil) {
					break
				}
				select {
				case <-rounds:
				case <-ctx.Done():
					t.Fatal("path 1 was not retired")
				}
			}
			pr.smu.Lock()
			stopAt.Store(pr.sl.wroteAt())
			dead.Store(pr.sl)
			pr.smu.Unlock()
			start := time.Now()
			errc := make(chan error, 1)
			go func() { errc <- recvMsg(ctx, to, from.Rank(), seq, 1<<20) }()
			err := sendMsg(ctx, from, to.Rank(), seq, 1<<20)
			if !errors.Is(err, errs.ErrPeerLost) || !strings.Contains(err.Error(), "every path stopped") {
				t.Fatalf("Send with every path stopped: %v after %v, want ErrPeerLost (every path stopped)", err, time.Since(start).Round(time.Millisecond))
			}
			if err := <-errc; !errors.Is(err, errs.ErrPeerLost) {
				t.Fatalf("Recv from a rank whose paths all stopped: %v, want ErrPeerLost", err)
			}
			if !logHas(logs.String(), "path=1", "idle ping got no acknowledgement") {
				t.Error("no WARN for path 1's retirement")
			}
		})
	}
}

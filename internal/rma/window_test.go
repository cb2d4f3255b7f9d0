package rma

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/transport/local"
	"github.com/hcomm-go/hcomm/internal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gather is an in-process all-gather and barrier for the tests' ranks.
type gather struct {
	n    int
	mu   sync.Mutex
	recs []byte
	got  int
	done chan struct{}
	out  []byte
}

func newGather(n int) *gather { return &gather{n: n, done: make(chan struct{})} }

func (g *gather) exchange(rank int) func(context.Context, []byte) ([]byte, error) {
	return func(ctx context.Context, rec []byte) ([]byte, error) {
		g.mu.Lock()
		if g.recs == nil {
			g.recs = make([]byte, g.n*len(rec))
		}
		copy(g.recs[rank*len(rec):], rec)
		g.got++
		done := g.done
		if g.got == g.n {
			g.out, g.recs, g.got = g.recs, nil, 0
			g.done = make(chan struct{})
			close(done)
		}
		out := &g.out
		g.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return bytes.Clone(*out), nil
	}
}

func (g *gather) barrier(rank int) func(context.Context) error {
	ex := g.exchange(rank)
	return func(ctx context.Context) error {
		_, err := ex(ctx, make([]byte, RecordSize))
		return err
	}
}

type kind struct {
	name     string
	alloc    bool
	messages bool
	mode     string
	replies  bool // a reply path (Params.Replies)
}

var kinds = []kind{
	{"alloc", true, false, "mapped", false},
	{"user", false, false, "cross-memory", false},
	{"alloc-messages", true, true, "messages", false},
	{"user-messages", false, true, "messages", false},
	{"alloc-messages-replies", true, true, "messages", true},
}

// group makes a window over n ranks of one process, each exposing size
// bytes.
func group(t *testing.T, n, size int, k kind) []*Window {
	t.Helper()
	f, fr := local.NewFabric(n), local.NewFabric(n)
	g := newGather(n)
	ws := make([]*Window, n)
	errc := make(chan error, n)
	for r := range n {
		go func() {
			p := Params{Rank: r, Size: n, ID: 7, T: f.Endpoint(r), Alloc: -1, Chunk: 1000,
				Exchange: g.exchange(r), Barrier: g.barrier(r), Messages: k.messages}
			if k.replies {
				p.Replies = func(context.Context) (transport.Transport, error) { return fr.Endpoint(r), nil }
			}
			if k.alloc {
				p.Alloc = size
			} else {
				p.Buf = make([]byte, size)
			}
			w, err := New(context.Background(), p)
			ws[r] = w
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, w := range ws {
			w.Close()
		}
	})
	return ws
}

// Local counts the ranks whose record names this machine: a rank whose
// machine key differs (another host) is not counted.
func TestLocalRanks(t *testing.T) {
	const n = 3
	f := local.NewFabric(n)
	g := newGather(n)
	ws := make([]*Window, n)
	errc := make(chan error, n)
	for r := range n {
		go func() {
			ex := g.exchange(r)
			p := Params{Rank: r, Size: n, ID: 7, T: f.Endpoint(r), Alloc: 64, Messages: true, Barrier: g.barrier(r),
				Exchange: func(ctx context.Context, rec []byte) ([]byte, error) {
					all, err := ex(ctx, rec)
					if err == nil {
						all[2*RecordSize+recMachine] ^= 1 // rank 2 is elsewhere
					}
					return all, err
				}}
			w, err := New(context.Background(), p)
			ws[r] = w
			errc <- err
		}()
	}
	for range n {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	// Rank 2 counts itself and the two others (their keys are its own).
	for r, want := range []int{2, 2, 3} {
		if got := ws[r].Local(); got != want {
			t.Errorf("rank %d: Local() = %d, want %d", r, got, want)
		}
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

func TestPutGet(t *testing.T) {
	ctx := context.Background()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			const n, size = 3, 5000
			ws := group(t, n, size, k)
			if m := ws[0].Mode(1); m != k.mode {
				t.Fatalf("rank 0 reaches rank 1 by %s, want %s", m, k.mode)
			}
			var wg sync.WaitGroup
			errc := make(chan error, n)
			for r, w := range ws {
				wg.Go(func() {
					// Each rank writes its part of every window: bytes [r*1500, r*1500+1500).
					for tg := range n {
						if err := w.Put(ctx, tg, r*1500, pattern(1500, byte(r)), Shape{Len: 1500}); err != nil {
							errc <- fmt.Errorf("rank %d Put to %d: %w", r, tg, err)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			for r, w := range ws {
				for src := range n {
					if !bytes.Equal(w.Bytes()[src*1500:src*1500+1500], pattern(1500, byte(src))) {
						t.Fatalf("rank %d's window: part of rank %d wrong", r, src)
					}
				}
				got := make([]byte, 1500)
				tg := (r + 1) % n
				if err := w.Get(ctx, tg, 1500, got, Shape{Len: 1500}); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, pattern(1500, 1)) {
					t.Fatalf("rank %d Get from %d: wrong bytes", r, tg)
				}
			}
		})
	}
}

func TestStrided(t *testing.T) {
	ctx := context.Background()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ws := group(t, 2, 100, k)
			// A 3x4 block out of a local 3x10 matrix into a 10x10 window at (2, 5).
			src := pattern(30, 1)
			s := Shape{Rows: 3, Len: 4, Pitch: 10, LocalPitch: 10}
			if err := ws[0].Put(ctx, 1, 25, src, s); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, 100)
			for r := range 3 {
				copy(want[25+10*r:25+10*r+4], src[10*r:10*r+4])
			}
			if !bytes.Equal(ws[1].Bytes(), want) {
				t.Fatalf("window after PutStrided:\n%v\nwant\n%v", ws[1].Bytes(), want)
			}
			got := make([]byte, 12)
			if err := ws[0].Get(ctx, 1, 25, got, Shape{Rows: 3, Len: 4, Pitch: 10, LocalPitch: 4}); err != nil {
				t.Fatal(err)
			}
			for r := range 3 {
				if !bytes.Equal(got[4*r:4*r+4], src[10*r:10*r+4]) {
					t.Fatalf("GetStrided row %d: %v", r, got)
				}
			}
		})
	}
}

func TestPutSignal(t *testing.T) {
	ctx := context.Background()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ws := group(t, 2, 64, k)
			done := make(chan error, 1)
			go func() {
				for i := uint64(1); i <= 50; i++ {
					if err := ws[0].PutSignal(ctx, 1, 0, pattern(8, byte(i)), Shape{Len: 8}, 3, 1); err != nil {
						done <- err
						return
					}
					if _, err := ws[0].WaitSignal(ctx, 5, i); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for i := uint64(1); i <= 50; i++ {
				v, err := ws[1].WaitSignal(ctx, 3, i)
				if err != nil {
					t.Fatal(err)
				}
				if v != i {
					t.Fatalf("signal %d, want %d", v, i)
				}
				if !bytes.Equal(ws[1].Bytes()[:8], pattern(8, byte(i))) {
					t.Fatalf("round %d: the signal arrived before the data", i)
				}
				if err := ws[1].PutSignal(ctx, 0, 0, nil, Shape{}, 5, 1); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBounds(t *testing.T) {
	ctx := context.Background()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ws := group(t, 2, 100, k)
			src := make([]byte, 200)
			for _, tc := range []struct {
				name   string
				target int
				off    int
				buf    []byte
				s      Shape
				want   string
			}{
				{"past the end", 1, 90, src, Shape{Len: 11}, "offset 90 length 11"},
				{"negative offset", 1, -1, src, Shape{Len: 1}, "offset -1"},
				{"too long", 1, 0, src, Shape{Len: 101}, "length 101"},
				{"strided past the end", 1, 50, src, Shape{Rows: 6, Len: 1, Pitch: 10, LocalPitch: 1}, "6 rows"},
				{"overlapping rows", 1, 0, src, Shape{Rows: 2, Len: 10, Pitch: 5, LocalPitch: 10}, "pitch 5"},
				{"short local buffer", 1, 0, src[:5], Shape{Len: 10}, "local buffer"},
				{"bad target", 2, 0, src, Shape{Len: 1}, "target 2"},
				{"negative target", -1, 0, src, Shape{Len: 1}, "target -1"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					for _, op := range []string{"Put", "Get"} {
						var err error
						if op == "Put" {
							err = ws[0].Put(ctx, tc.target, tc.off, tc.buf, tc.s)
						} else {
							err = ws[0].Get(ctx, tc.target, tc.off, tc.buf, tc.s)
						}
						if !errors.Is(err, errs.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) ||
							!strings.Contains(err.Error(), "window 7") {
							t.Fatalf("%s: %v; want ErrInvalidArgument naming the window and %q", op, err, tc.want)
						}
					}
				})
			}
			if !bytes.Equal(ws[1].Bytes(), make([]byte, 100)) {
				t.Fatal("a refused Put changed the target's window")
			}
			if err := ws[0].PutSignal(ctx, 1, 0, nil, Shape{}, NumSignals, 1); !errors.Is(err, errs.ErrInvalidArgument) {
				t.Fatalf("PutSignal to signal %d: %v", NumSignals, err)
			}
			if _, err := ws[0].WaitSignal(ctx, -1, 1); !errors.Is(err, errs.ErrInvalidArgument) {
				t.Fatalf("WaitSignal on signal -1: %v", err)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	ctx := context.Background()
	ws := group(t, 2, 10, kinds[0])
	for _, w := range ws {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ws[0].Put(ctx, 1, 0, []byte{1}, Shape{Len: 1}); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
	if _, err := ws[0].WaitSignal(ctx, 0, 1); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("WaitSignal after Close: %v", err)
	}
	if err := ws[0].Close(); !errors.Is(err, errs.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
}

func TestPeerLost(t *testing.T) {
	ctx := context.Background()
	for _, k := range kinds[2:] {
		t.Run(k.name, func(t *testing.T) {
			ws := group(t, 2, 10, k)
			ws[1].t.Abort(errors.New("test: rank 1 dies"))
			// The progress goroutine notices; every later access fails.
			<-ws[0].peers[1].lostCh
			err := ws[0].Put(ctx, 1, 0, []byte{1}, Shape{Len: 1})
			if !errors.Is(err, errs.ErrAborted) && !errors.Is(err, errs.ErrPeerLost) {
				t.Fatalf("Put to a lost rank: %v", err)
			}
			if err := ws[0].Flush(ctx, 1); err == nil {
				t.Fatal("Flush to a lost rank succeeded")
			}
		})
	}
}

func TestWaitSignalDeadline(t *testing.T) {
	ws := group(t, 2, 10, kinds[0])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := ws[0].WaitSignal(ctx, 0, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitSignal with nobody signalling: %v", err)
	}
}

// askedCtx reports, by closing asked, the first time its Done channel is
// asked for.
type askedCtx struct {
	context.Context
	asked chan struct{}
	once  sync.Once
}

func (c *askedCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.asked) })
	return c.Context.Done()
}

// A WaitSignal cancelled while it spins returns at once, however long
// its spin budget (an hour here): the context is cancelled only once the
// spin has asked for its Done channel, so the spin, not the sleep, must
// notice it.
func TestWaitSignalCancelSpinning(t *testing.T) {
	ws := group(t, 2, 10, kinds[0])
	w := ws[0]
	w.spin.Store(int64(time.Hour))
	parent, cancel := context.WithCancel(context.Background())
	ctx := &askedCtx{Context: parent, asked: make(chan struct{})}
	go func() {
		<-ctx.asked
		cancel()
	}()
	if _, err := w.WaitSignal(ctx, 0, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitSignal cancelled while spinning: %v", err)
	}
	if got := time.Duration(w.spin.Load()); got != spinMin {
		t.Fatalf("after a cancelled wait the spin is %v, want %v", got, spinMin)
	}
	// The fast path is unchanged: a signal already there is returned.
	if err := ws[1].PutSignal(context.Background(), 0, 0, nil, Shape{}, 0, 1); err != nil {
		t.Fatal(err)
	}
	if v, err := w.WaitSignal(context.Background(), 0, 1); err != nil || v != 1 {
		t.Fatalf("WaitSignal of a set signal = %d, %v", v, err)
	}
}

// hostile makes a window on rank 0 of two; rank 1 is the returned raw
// endpoint, which speaks the message protocol by hand.
func hostile(t *testing.T) (*Window, *local.Transport, uint32) {
	w, ep, _, nonce := hostileWith(t, false)
	return w, ep, nonce
}

// hostileWith is hostile, with a reply path (Params.Replies) if replies:
// rank 1's end of it is the third result (nil without).
func hostileWith(t *testing.T, replies bool) (*Window, *local.Transport, *local.Transport, uint32) {
	ctx := context.Background()
	f, fr := local.NewFabric(2), local.NewFabric(2)
	g := newGather(2)
	var w *Window
	errc := make(chan error, 1)
	go func() {
		var err error
		p := Params{Rank: 0, Size: 2, ID: 3, T: f.Endpoint(0), Alloc: 64,
			Exchange: g.exchange(0), Barrier: g.barrier(0), Messages: true}
		if replies {
			p.Replies = func(context.Context) (transport.Transport, error) { return fr.Endpoint(0), nil }
		}
		w, err = New(ctx, p)
		errc <- err
	}()
	var rec [RecordSize]byte
	binary.LittleEndian.PutUint32(rec[0:], recMagic)
	rec[20] = kindAlloc
	binary.LittleEndian.PutUint64(rec[8:], 64) // rank 1 exposes 64 bytes
	all, err := g.exchange(1)(ctx, rec[:])
	if err != nil {
		t.Fatal(err)
	}
	nonce := binary.LittleEndian.Uint32(all[4:])
	if err := g.barrier(1)(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !replies {
		fr.Endpoint(0).Close()
		t.Cleanup(func() { w.Close(); f.Endpoint(1).Close() })
		return w, f.Endpoint(1), nil, nonce
	}
	if w.rt == nil {
		t.Fatal("no reply path, though rank 0 reaches rank 1 by messages")
	}
	t.Cleanup(func() { w.Close(); f.Endpoint(1).Close(); fr.Endpoint(1).Close() })
	return w, f.Endpoint(1), fr.Endpoint(1), nonce
}

// A hostile peer: rank 1 sends requests out of bounds, for other windows,
// and finally garbage.
func TestHostilePeer(t *testing.T) {
	ctx := context.Background()
	w, ep, nonce := hostile(t)
	fp := w.fp
	send := func(h header, payload []byte) {
		t.Helper()
		var b [headerSize]byte
		h.encode(b[:])
		if err := ep.Send(ctx, 0, &fp, b[:]); err != nil {
			t.Fatal(err)
		}
		_, n := h.payloadRows()
		for off := 0; off < len(payload); off += n { // one message per row
			if err := ep.Send(ctx, 0, &fp, payload[off:off+n]); err != nil {
				t.Fatal(err)
			}
		}
	}
	recvReply := func() header {
		t.Helper()
		var b [headerSize]byte
		if err := ep.Recv(ctx, 0, &fp, b[:]); err != nil {
			t.Fatal(err)
		}
		var h header
		if err := h.decode(b[:]); err != nil {
			t.Fatal(err)
		}
		return h
	}
	for _, tc := range []struct {
		name string
		h    header
		want uint8
	}{
		{"past the end", header{op: opPut, win: 3, nonce: nonce, off: 60, n: 5}, stBounds},
		{"offset past the end", header{op: opPut, win: 3, nonce: nonce, off: 1 << 40, n: 1}, stBounds},
		{"strided past the end", header{op: opPut, win: 3, nonce: nonce, off: 0, n: 4, rows: 5, pitch: 16}, stBounds},
		{"overlapping rows", header{op: opPut, win: 3, nonce: nonce, off: 0, n: 4, rows: 2, pitch: 1}, stBounds},
		{"stale window", header{op: opPut, win: 2, nonce: nonce, off: 0, n: 4}, stStale},
		{"stale nonce", header{op: opPut, win: 3, nonce: nonce + 1, off: 0, n: 4}, stStale},
		{"bad signal", header{op: opPutSignal, win: 3, nonce: nonce, n: 1, sig: NumSignals}, stBadSignal},
		{"get past the end", header{op: opGet, win: 3, nonce: nonce, off: 1, n: 64}, stBounds},
		{"in range", header{op: opPut, win: 3, nonce: nonce, off: 8, n: 4}, stOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, n := tc.h.payloadRows()
			var payload []byte
			if tc.h.op != opGet {
				payload = bytes.Repeat([]byte{0xee}, rows*n)
			}
			send(tc.h, payload)
			if r := recvReply(); r.status != tc.want || r.op != opReply {
				t.Fatalf("reply %+v, want status %d", r, tc.want)
			}
		})
	}
	want := make([]byte, 64)
	copy(want[8:], []byte{0xee, 0xee, 0xee, 0xee})
	if !bytes.Equal(w.Bytes(), want) {
		t.Fatalf("window after hostile requests: %v", w.Bytes())
	}
	if v := w.Signal(0); v != 0 {
		t.Fatalf("signal 0 = %d after a refused PutSignal", v)
	}
	// A malformed header ends the peer's stream; nothing panics.
	var bad [headerSize]byte
	copy(bad[:], "not a header")
	if err := ep.Send(ctx, 0, &fp, bad[:]); err != nil {
		t.Fatal(err)
	}
	<-w.peers[1].lostCh
	if err := w.Put(ctx, 1, 0, nil, Shape{}); !errors.Is(err, errs.ErrPeerLost) {
		t.Fatalf("Put to a peer that broke the protocol: %v", err)
	}
}

// A peer that never answers: the request times out and the window is
// unusable afterwards (a late reply must not land in a returned buffer).
func TestRequestTimeout(t *testing.T) {
	ctx := context.Background()
	w, _, _ := hostile(t)
	w.timeout = 20 * time.Millisecond
	err := w.Get(ctx, 1, 0, nil, Shape{})
	var te TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get from a silent peer: %v", err)
	}
	if err := w.Put(ctx, 0, 0, []byte{1}, Shape{Len: 1}); !errors.Is(err, errs.ErrAborted) {
		t.Fatalf("Put after a timed-out request: %v", err)
	}
}

// TestDecodePayloadBound: a header whose rows × bytes exceed maxPayload
// is refused, also where the product wraps around 2^64 (a hostile peer
// would otherwise make the target drain that many bytes).
func TestDecodePayloadBound(t *testing.T) {
	for _, tt := range []struct {
		rows uint32
		n    uint64
		ok   bool
	}{
		{0, maxPayload, true},
		{0, maxPayload + 1, false},
		{1 << 10, maxPayload >> 10, true},
		{1 << 10, maxPayload>>10 + 1, false},
		{1 << 31, 1 << 33, false}, // 2^64: 0 in uint64
		{1<<31 - 1, 1<<33 + 3, false},
	} {
		var b [headerSize]byte
		(&header{op: opPut, rows: tt.rows, n: tt.n}).encode(b[:])
		var h header
		if err := h.decode(b[:]); (err == nil) != tt.ok {
			t.Errorf("%d rows of %d bytes: decode error %v, want accepted %v", tt.rows, tt.n, err, tt.ok)
		}
	}
}

func FuzzDecodeHeader(f *testing.F) {
	var b [headerSize]byte
	(&header{op: opPut, win: 1, nonce: 2, off: 3, n: 4}).encode(b[:])
	f.Add(b[:])
	(&header{op: opPut, rows: 1 << 31, n: 1 << 33}).encode(b[:])
	f.Add(b[:])
	(&header{op: opGet, rows: 3, n: 4, pitch: 8}).encode(b[:])
	f.Add(b[:])
	f.Add([]byte("short"))
	w := &Window{id: 1, nonce: 2, mem: make([]byte, 100)}
	f.Fuzz(func(t *testing.T, in []byte) {
		var h header
		if h.decode(in) != nil {
			return
		}
		var out [headerSize]byte
		h.encode(out[:])
		if !bytes.Equal(out[:], in) {
			t.Fatalf("decode/encode changed the header: %x -> %x", in, out)
		}
		rows, n := h.payloadRows()
		if rows < 0 || n < 0 || rows > 0 && n > maxPayload/rows {
			t.Fatalf("payload of %d rows of %d bytes accepted", rows, n)
		}
		if w.validate(&h) == stOK && h.op != opReply {
			end := int(h.off) + (max(int(h.rows), 1)-1)*int(h.pitch) + int(h.n)
			if h.n > 0 && end > len(w.mem) {
				t.Fatalf("request reaching byte %d of a window of %d accepted", end, len(w.mem))
			}
		}
	})
}

// FuzzPeerRecord: a peer's window record (from the exchange) is decoded
// without panicking, and what is accepted is within limits.
func FuzzPeerRecord(f *testing.F) {
	var rec [RecordSize]byte
	binary.LittleEndian.PutUint32(rec[0:], recMagic)
	binary.LittleEndian.PutUint64(rec[8:], 4096)
	rec[20], rec[21] = kindAlloc, 10
	copy(rec[64:], "hcomm-win-1")
	f.Add(rec[:])
	f.Add(make([]byte, RecordSize))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) != RecordSize {
			return
		}
		for _, alloc := range []bool{true, false} {
			w := &Window{rank: 0, size: 2, alloc: alloc}
			q, err := w.newPeer(1, in, [32]byte{}, true)
			if err != nil {
				continue
			}
			if q.size < 0 || q.size > maxPayload || q.mode != modeMsg {
				t.Fatalf("accepted size %d, mode %d", q.size, q.mode)
			}
		}
	})
}

// WaitSignal's spin adapts: a wait that has to sleep and is not satisfied
// soon after resets the spin to spinMin, waits the spin satisfies
// lengthen it (up to spinMax), and so does one satisfied soon after its
// spin.
func TestWaitSignalAdaptiveSpin(t *testing.T) {
	ws := group(t, 2, 10, kinds[0])
	w := ws[0]
	ctx := context.Background()
	if got := time.Duration(w.spin.Load()); got != spinMax {
		t.Fatalf("a new window spins %v, want %v", got, spinMax)
	}
	expired, cancel := context.WithCancel(ctx)
	cancel()
	w.WaitSignal(expired, 0, 1) // nobody signals: the spin misses
	if got := time.Duration(w.spin.Load()); got != spinMin {
		t.Fatalf("after a wait that missed the spin is %v, want %v", got, spinMin)
	}
	if err := ws[1].PutSignal(ctx, 0, 0, nil, Shape{}, 0, 1); err != nil {
		t.Fatal(err)
	}
	prev := w.spin.Load()
	for i := range 200 {
		if _, err := w.WaitSignal(ctx, 0, 1); err != nil {
			t.Fatal(err)
		}
		got := w.spin.Load()
		if got != int64(grow(time.Duration(prev))) {
			t.Fatalf("satisfied wait %d took the spin from %v to %v", i, time.Duration(prev), time.Duration(got))
		}
		prev = got
	}
	if got := time.Duration(w.spin.Load()); got != spinMax {
		t.Fatalf("after 200 satisfied waits the spin is %v, want %v", got, spinMax)
	}
	// Spin satisfied soon after sleeping ("soon" is an hour here, so the
	// test does not depend on timing): from spinMin up.
	defer func(d time.Duration) { spinWorth = d }(spinWorth)
	spinWorth = time.Hour
	w.spin.Store(int64(spinMin))
	for round := uint64(2); round < 6; round++ {
		done := make(chan error, 1)
		go func() {
			// Signal once the waiter sleeps on the bell.
			for atomic.LoadUint32(w.seg.u32(waitersOff)) == 0 {
				runtime.Gosched()
			}
			done <- ws[1].PutSignal(ctx, 0, 0, nil, Shape{}, 0, 1)
		}()
		before := w.spin.Load()
		if _, err := w.WaitSignal(ctx, 0, round); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := w.spin.Load(); got != int64(grow(time.Duration(before))) {
			t.Fatalf("round %d: a wait satisfied soon after its spin took the spin from %v to %v", round, time.Duration(before), time.Duration(got))
		}
	}
}

// Several goroutines Put to and Get from the same peers at once over the
// message path, whose requests then overlap (up to maxOutstanding per
// peer), both ranks at the same time: every byte lands where it should,
// and nothing deadlocks.
func TestConcurrentRequests(t *testing.T) {
	const g, rounds, part = 24, 20, 3000
	for _, k := range kinds[2:] {
		t.Run(k.name, func(t *testing.T) {
			ws := group(t, 2, g*part, k)
			ctx := context.Background()
			var wg sync.WaitGroup
			for r := range 2 {
				for i := range g {
					wg.Go(func() {
						w, peer := ws[r], 1-r
						got := make([]byte, part)
						for round := range rounds {
							// Goroutine i of rank r owns part i of the peer's
							// window when r is 0, and reads part i of it otherwise.
							if r == 0 {
								src := pattern(part, byte(i+round))
								if err := w.Put(ctx, peer, i*part, src, Shape{Len: part}); err != nil {
									t.Error(err)
									return
								}
								if err := w.Get(ctx, peer, i*part, got, Shape{Len: part}); err != nil {
									t.Error(err)
									return
								}
								if !bytes.Equal(got, src) {
									t.Errorf("goroutine %d round %d: Get after Put differs", i, round)
									return
								}
							} else if err := w.Get(ctx, peer, i*part, got, Shape{Len: part}); err != nil {
								t.Error(err)
								return
							}
						}
					})
				}
			}
			wg.Wait()
		})
	}
}

// A hostile peer answering a Get with a reply piece that reaches past the
// requested row: the piece is not written, the peer's stream ends and the
// Get fails; a piece in place completes it.
//
// With a reply path (Params.Replies) the same holds for pieces that come
// on it, and a header other than a piece's there ends the peer's stream
// too.
func TestHostileReplyPiece(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name    string
		off     uint64
		n       int
		ok      bool
		replies bool
		op      uint8 // the header's operation; 0: opPart
	}{
		{name: "in place", off: 4, n: 12, ok: true},
		{name: "past the row", off: 8, n: 16},
		{name: "past the rows", off: 16, n: 4},
		{name: "reply path/in place", off: 4, n: 12, ok: true, replies: true},
		{name: "reply path/past the row", off: 8, n: 16, replies: true},
		{name: "reply path/past the rows", off: 16, n: 4, replies: true},
		{name: "reply path/a request", off: 4, n: 12, replies: true, op: opPut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, ep, rep, _ := hostileWith(t, tc.replies)
			fp := w.fp
			out := ep // where the reply goes
			if tc.replies {
				out = rep
			}
			dst := make([]byte, 32)
			errc := make(chan error, 1)
			go func() { errc <- w.Get(ctx, 1, 0, dst[:16], Shape{Len: 16}) }()
			var b [headerSize]byte
			if err := ep.Recv(ctx, 0, &fp, b[:]); err != nil {
				t.Fatal(err)
			}
			var h header
			if err := h.decode(b[:]); err != nil || h.op != opGet {
				t.Fatalf("request %+v, %v", h, err)
			}
			p := header{op: cmp.Or(tc.op, opPart), win: h.win, nonce: h.nonce, req: h.req, off: tc.off, n: uint64(tc.n), add: 1}
			p.encode(b[:])
			if err := out.Send(ctx, 0, &fp, b[:]); err != nil {
				t.Fatal(err)
			}
			// A window that refused the piece does not take its bytes.
			pctx, pcancel := context.WithCancel(ctx)
			sent := make(chan error, 1)
			go func() { sent <- out.Send(pctx, 0, &fp, bytes.Repeat([]byte{0xee}, tc.n)) }()
			err := <-errc
			if tc.ok {
				if err := <-sent; err != nil {
					t.Fatal(err)
				}
			}
			pcancel()
			if !tc.ok {
				<-sent
			}
			want := make([]byte, 32)
			if tc.ok {
				copy(want[tc.off:], bytes.Repeat([]byte{0xee}, tc.n))
				if err != nil {
					t.Fatalf("Get answered by a piece in place: %v", err)
				}
			} else if !errors.Is(err, errs.ErrPeerLost) {
				t.Fatalf("Get answered by a piece out of place: %v, want ErrPeerLost", err)
			}
			if !bytes.Equal(dst, want) {
				t.Fatalf("destination after the reply: %v", dst)
			}
		})
	}
}

// TestPartsVersion: the pieces of a Get's reply (opPart), and the reply
// path they travel on, are not understood by a build of an earlier
// protocol version, so the transport's
// handshake version must be at least the one that brought them: a rank of
// an older build is then refused at its first connection, naming both
// versions (internal/transport/tcp's version tests), rather than dropping
// its peer at the first piece.
func TestPartsVersion(t *testing.T) {
	if wire.HandshakeVersion < partsVersion {
		t.Fatalf("wire.HandshakeVersion = %d, but a Get's reply goes in pieces since version %d", wire.HandshakeVersion, partsVersion)
	}
	if wire.HandshakeVersion < repliesVersion {
		t.Fatalf("wire.HandshakeVersion = %d, but a Get's reply goes on the reply path since version %d", wire.HandshakeVersion, repliesVersion)
	}
	var h header
	b := make([]byte, headerSize)
	(&header{op: opPart, n: 1, add: 1}).encode(b)
	if err := h.decode(b); err != nil || h.op != opPart {
		t.Fatalf("a piece's header: %+v, %v", h, err)
	}
}

// TestReplyPath: with a reply path (Params.Replies) a Get's reply does not
// hold up what follows on the window's own stream. Rank 1 (by hand) asks
// for a Get and then a Put, and reads the Put's acknowledgement before it
// reads any of the Get's reply: on one stream the reply would come first
// (and on this rendezvous transport the acknowledgement would wait behind
// it), as a rank's request waited behind its reply to the peer's Get.
// The reply then comes whole on the reply path.
func TestReplyPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, ep, rep, nonce := hostileWith(t, true)
	fp := w.fp
	for i := range w.Bytes() {
		w.Bytes()[i] = byte(i)
	}
	var b [headerSize]byte
	send := func(h header) {
		t.Helper()
		h.encode(b[:])
		if err := ep.Send(ctx, 0, &fp, b[:]); err != nil {
			t.Fatal(err)
		}
	}
	recv := func(tr *local.Transport) header {
		t.Helper()
		if err := tr.Recv(ctx, 0, &fp, b[:]); err != nil {
			t.Fatal(err)
		}
		var h header
		if err := h.decode(b[:]); err != nil {
			t.Fatal(err)
		}
		return h
	}
	send(header{op: opGet, win: 3, nonce: nonce, off: 0, n: 48, req: 1})
	send(header{op: opPut, win: 3, nonce: nonce, off: 60, n: 4, req: 2})
	if err := ep.Send(ctx, 0, &fp, []byte{9, 9, 9, 9}); err != nil {
		t.Fatal(err)
	}
	if h := recv(ep); h.op != opReply || h.req != 2 || h.status != stOK {
		t.Fatalf("first answer on the window's stream: %+v, want the Put's acknowledgement", h)
	}
	h := recv(rep)
	if h.op != opPart || h.req != 1 || h.off != 0 || h.n != 48 || h.add != 1 {
		t.Fatalf("on the reply path: %+v, want the Get's reply in one piece", h)
	}
	got := make([]byte, 48)
	if err := rep.Recv(ctx, 0, &fp, got); err != nil {
		t.Fatal(err)
	}
	for i, v := range got {
		if v != byte(i) {
			t.Fatalf("reply byte %d = %d", i, v)
		}
	}
	if !bytes.Equal(w.Bytes()[60:], []byte{9, 9, 9, 9}) {
		t.Fatalf("window after the Put: %v", w.Bytes()[60:])
	}
}

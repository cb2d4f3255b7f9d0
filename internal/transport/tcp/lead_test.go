package tcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

func TestLeadLog(t *testing.T) {
	l := newLeadLog(16)
	var stream []byte
	add := func(b []byte) {
		t.Helper()
		if !l.fits(len(b)) {
			t.Fatalf("%d bytes do not fit with %d held", len(b), l.held())
		}
		l.add(b)
		stream = append(stream, b...)
	}
	from := func(off uint64) []byte {
		t.Helper()
		a, b, err := l.from(off)
		if err != nil {
			t.Fatal(err)
		}
		return append(append([]byte(nil), a...), b...)
	}
	add([]byte("0123456789"))
	if got := from(3); !bytes.Equal(got, stream[3:]) {
		t.Fatalf("from 3: %q", got)
	}
	if l.fits(7) {
		t.Fatal("7 more bytes fit in 6 free")
	}
	l.trim(8)
	add([]byte("abcdefghijkl")) // wraps
	if got := from(8); !bytes.Equal(got, stream[8:]) {
		t.Fatalf("from 8 after the wrap: %q, want %q", got, stream[8:])
	}
	if got := from(15); !bytes.Equal(got, stream[15:]) {
		t.Fatalf("from 15: %q, want %q", got, stream[15:])
	}
	if got := from(22); len(got) != 0 {
		t.Fatalf("from the end: %q", got)
	}
	for _, off := range []uint64{0, 7, 23} {
		if _, _, err := l.from(off); err == nil {
			t.Errorf("from %d (held %d to %d): no error", off, l.base, l.end)
		}
	}
	l.trim(100) // past the end: holds nothing, keeps the end
	if l.held() != 0 || l.end != 22 {
		t.Fatalf("after trimming past the end: base %d end %d", l.base, l.end)
	}
	l.reset(40)
	if _, _, err := l.from(40); err != nil || l.held() != 0 {
		t.Fatalf("after reset: %v, held %d", err, l.held())
	}
	frame := make([]byte, 5)
	if n := testing.AllocsPerRun(100, func() {
		l.trim(l.end)
		l.add(frame)
		l.from(l.base)
	}); n != 0 {
		t.Errorf("%v allocations per copy", n)
	}
}

func TestResume(t *testing.T) {
	tests := []struct {
		name              string
		read, held, at, n uint64
		take, skip        uint64
		wantErr           string
	}{
		{"replay from what was read", 100, 0, 100, 50, 0, 0, ""},
		{"read past the offset", 120, 0, 100, 50, 0, 20, ""},
		{"read all of the replay", 150, 0, 100, 50, 0, 50, ""},
		{"acknowledged, not read yet", 80, 30, 100, 50, 20, 0, ""},
		{"resume past what arrived", 80, 10, 100, 50, 0, 0, "this rank has 90 bytes"},
		{"replay ends before what was read", 151, 0, 100, 50, 0, 0, "already read 151"},
		{"empty replay at the end", 100, 0, 100, 0, 0, 0, ""},
		{"offset near 2^64", 0, 0, 1<<64 - 1, 0, 0, 0, "this rank has 0 bytes"},
	}
	for _, tt := range tests {
		take, skip, err := resume(tt.read, tt.held, tt.at, tt.n)
		if tt.wantErr != "" {
			if err == nil || !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: %v, want a protocol violation saying %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || take != tt.take || skip != tt.skip {
			t.Errorf("%s: take %d skip %d err %v, want %d %d", tt.name, take, skip, err, tt.take, tt.skip)
		}
	}
}

// leadWorld is a pair over two loopback paths, one socket each, whose
// rank 0 can be made to see its send lead stall (stall), with its peer's
// host taken to have acknowledged at most acked bytes of the first lead
// (when freeze is set).
type leadWorld struct {
	trs    []*Transport
	logs   *syncBuffer
	pr     *peer // rank 0's side of the pair
	old    atomic.Pointer[conn]
	stall  atomic.Bool
	freeze atomic.Bool
	acked  atomic.Uint64
	at     atomic.Pointer[string]           // testLeadAt place where stall is set
	lose   atomic.Bool                      // frames on the first lead are lost
	cut    atomic.Int64                     // bytes of the next lost frame that arrive after all
	moveTo atomic.Pointer[func(next *conn)] // called before a move writes its lead frame
}

// newLeadWorld makes a leadWorld, calling setup with each transport
// before they connect.
func newLeadWorld(t *testing.T, setup ...func(tr *Transport)) *leadWorld {
	t.Helper()
	w := &leadWorld{}
	w.trs, w.logs = multiPathWorld(t, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d")
	for _, tr := range w.trs {
		for _, f := range setup {
			f(tr)
		}
	}
	t0 := w.trs[0]
	t0.testMoveTo = func(next *conn) {
		if f := w.moveTo.Load(); f != nil {
			(*f)(next)
		}
	}
	t0.testAcked = func(c *conn, a uint64) uint64 {
		if w.freeze.Load() && c == w.old.Load() {
			return min(a, w.acked.Load())
		}
		return a
	}
	t0.testStall = func(c *conn) bool { return w.stall.Load() && c == w.old.Load() }
	t0.testLost = func(c *conn) bool { return w.lose.Load() && c == w.old.Load() }
	t0.testCutLost = func(*conn) int64 { return w.cut.Swap(0) }
	t0.testLeadAt = func(where string) {
		if p := w.at.Load(); p != nil && *p == where {
			w.stall.Store(true)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runAll(t, w.trs, func(tr *Transport) error { return barrier2(ctx, tr, 1-tr.Rank()) })
	w.pr = t0.peers[1]
	if !w.pr.leadOK {
		t.Fatal("the pair does not move its lead: no TCP_INFO acknowledgement counts?")
	}
	w.old.Store(w.pr.sl)
	return w
}

// moved waits until rank 0's send lead moved.
func (w *leadWorld) moved(ctx context.Context, t *testing.T) {
	t.Helper()
	for {
		w.pr.mu.Lock()
		sl := w.pr.sl
		w.pr.mu.Unlock()
		if sl != w.old.Load() {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the lead did not move:\n%s", w.logs.String())
		}
		time.Sleep(time.Millisecond)
	}
}

func sendMsg(ctx context.Context, tr *Transport, to, seq, size int) error {
	p := make([]byte, size)
	fill(p, tr.Rank(), seq)
	fp := fpFor(seq, size)
	return tr.Send(ctx, to, &fp, p)
}

func recvMsg(ctx context.Context, tr *Transport, from, seq, size int) error {
	p := make([]byte, size)
	fp := fpFor(seq, size)
	if err := tr.Recv(ctx, from, &fp, p); err != nil {
		return fmt.Errorf("message %d: %w", seq, err)
	}
	return check(p, from, seq)
}

// TestLeadMove moves rank 0's lead stream to path 1 at set points of the
// stream (small messages the peer read or did not, acknowledged or not,
// a header split between the streams; a large message whose header or
// first stripe is unacknowledged) and checks that every message arrives
// whole and in order, both ways, that the moves are logged, and that path
// 0 is dialed again and carries stripes again.
func TestLeadMove(t *testing.T) {
	const small = 100
	const frame = wire.FrameHeaderSize + small
	tests := []struct {
		name   string
		before int    // small messages sent before the move
		read   int    // of which rank 1 reads before the move
		acked  uint64 // bytes after them taken as acknowledged
		large  string // a large message in flight: where it stalls
		lost   bool   // the frames after the small ones never reach the peer
		cut    int64  // bytes of the first lost frame that arrive after all
	}{
		{"replay read already", 5, 5, 2 * frame, "", false, 0},
		{"replay partly read", 6, 3, 1 * frame, "", false, 0},
		{"acknowledged not read", 6, 1, 4 * frame, "", false, 0},
		{"header split", 4, 2, 2*frame + 10, "", false, 0},
		{"nothing to replay", 3, 3, 3 * frame, "", false, 0},
		{"large header unacknowledged", 2, 0, 2 * frame, "await", false, 0},
		{"large first stripe unacknowledged", 0, 0, wire.FrameHeaderSize + 1000, "await", false, 0},
		{"large header lost", 2, 2, 2 * frame, "await", true, 0},
		// The reordering a move must undo: the small message and the
		// large one's header are lost with path 0, the large one's
		// stripe waits on path 1 in front of the lead frame, and
		// rank 1 waits for the small message.
		{"small message and large header lost", 2, 2, 2 * frame, "await", true, 0},
		// The link goes down in the middle of the small frame: rank 1
		// waits for the rest of its payload, or of its header, with
		// the stripe and the lead frame behind it on path 1.
		{"small message cut in its payload", 2, 2, 2 * frame, "await", true, wire.FrameHeaderSize + 30},
		{"small message cut in its header", 2, 2, 2 * frame, "await", true, 10},
		// The large message's stripe is larger than rank 1 keeps
		// ahead of a lead frame (keptMax lowered): the Send waits
		// for the small message's acknowledgement before any stripe
		// goes, and moves the lead there.
		{"small message lost before a stripe beyond what is kept", 2, 2, 2 * frame, "quiet", true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			beyond := strings.Contains(tt.name, "beyond what is kept")
			w := newLeadWorld(t, func(tr *Transport) {
				if beyond {
					tr.testKeptMax = 64 << 10
				}
			})
			t0, t1 := w.trs[0], w.trs[1]
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			w.pr.smu.Lock()
			base := w.pr.sl.wroteAt()
			w.pr.smu.Unlock()
			w.acked.Store(base + tt.acked)
			w.freeze.Store(true)
			seq := 0
			for ; seq < tt.before; seq++ {
				if err := sendMsg(ctx, t0, 1, seq, small); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tt.read {
				if err := recvMsg(ctx, t1, 0, i, small); err != nil {
					t.Fatal(err)
				}
			}
			const large = 1 << 20
			if tt.large == "" {
				w.stall.Store(true)
				w.moved(ctx, t)
			} else {
				where := tt.large
				w.at.Store(&where)
			}
			w.cut.Store(tt.cut)
			w.lose.Store(tt.lost)
			// After the move (or across it): small and large messages.
			sizes := []int{large, small, 8, large, small}
			if strings.HasPrefix(tt.name, "small message") {
				sizes = append([]int{small}, sizes...)
			}
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
			for i := tt.read; i < tt.before; i++ {
				if err := recvMsg(ctx, t1, 0, i, small); err != nil {
					t.Fatal(err)
				}
			}
			for i, size := range sizes {
				if err := recvMsg(ctx, t1, 0, seq+i, size); err != nil {
					t.Fatalf("%v\n%s", err, w.logs.String())
				}
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			w.moved(ctx, t)
			logs := w.logs.String()
			if !strings.Contains(logs, "first path stopped") || !strings.Contains(logs, "path=0") {
				t.Errorf("no WARN naming path 0 for the move:\n%s", logs)
			}
			if !strings.Contains(logs, "peer moved the lead stream") {
				t.Errorf("no WARN for the receiver's move:\n%s", logs)
			}
			if strings.HasPrefix(tt.name, "small message") && !beyond && !strings.Contains(logs, "stripe of a later message ahead") {
				// The large message's stripe on path 1 stood in
				// front of the lead frame while rank 1 waited for
				// the small message lost before it.
				t.Errorf("rank 1 did not read the large message's stripe ahead of the lead frame:\n%s", logs)
			}
			// Both ways, and path 0 back into use for stripes.
			back := false
			var sentAt uint64
			for i := 0; !back; i++ {
				if ctx.Err() != nil {
					t.Fatalf("path 0 did not come back into use:\n%v\n%s", t0.Paths(), w.logs.String())
				}
				for from := range 2 {
					sendOne(ctx, t, w.trs, from, 1000+2*i+from, []int{8, stripeMin, 2 << 20}[i%3])
				}
				for _, s := range t0.Paths() {
					switch {
					case s.Path != 0 || s.Retired || s.Gen == 0:
					case sentAt == 0:
						sentAt = s.Sent
					case s.Sent > sentAt:
						back = true
					}
				}
			}
			// Rank 1's own send lead was on the path rank 0 left: it
			// moved too, at its first Send after the join.
			if logs := w.logs.String(); !strings.Contains(logs, `why="the peer moved its lead stream off the path"`) {
				t.Errorf("rank 1 did not move its send lead after rank 0's move:\n%s", logs)
			}
		})
	}
}

// TestLeadFrameBad: a lead frame that resumes past what the receiver has of
// the old stream fails the pair with a protocol violation, not a panic or
// a hang.
func TestLeadFrameBad(t *testing.T) {
	for _, tt := range []struct {
		name    string
		h       wire.FrameHeader
		payload int
		want    string
	}{
		{"resume past the stream", wire.FrameHeader{Type: wire.FrameLead, Paths: 1, Total: 1 << 40, Len: 4}, 4, "resumed at byte"},
		{"wrong path", wire.FrameHeader{Type: wire.FrameLead, Paths: 2, Total: 0}, 0, "off paths 0x2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newLeadWorld(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Rank 0 writes the frame on path 1's connection, where a
			// move would.
			c := w.pr.sview[w.pr.paths[1].conns[0].pos]
			h := tt.h
			if _, err := c.writeBufs(&h, [][]byte{make([]byte, tt.payload)}, 0); err != nil {
				t.Fatal(err)
			}
			fp := fpFor(1, 8)
			err := w.trs[1].Recv(ctx, 0, &fp, make([]byte, 8))
			if !errors.Is(err, errs.ErrPeerLost) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Recv: %v, want ErrPeerLost saying %q", err, tt.want)
			}
		})
	}
}

// TestReadKept: a kept stripe's buffer grows with the bytes that come, not
// with the length its header claims, and a stripe cut short is an error.
func TestReadKept(t *testing.T) {
	data := make([]byte, 3*keptChunk+5)
	fill(data, 0, 1)
	got, err := readKept(bytes.NewReader(data), uint64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("readKept: %v, equal %v", err, bytes.Equal(got, data))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = readKept(bytes.NewReader(make([]byte, 100)), 1<<30)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a stripe of 100 of 1 GiB: %v, want io.ErrUnexpectedEOF", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 4*keptChunk {
		t.Fatalf("reading 100 bytes of a stripe claiming 1 GiB allocated %d bytes", n)
	}
}

//go:build linux

package shm

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/allocs"
	"github.com/hcomm-go/hcomm/internal/errs"
)

func TestConfigInvalid(t *testing.T) {
	kv := newMemKV()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"zero size", Config{}},
		{"rank out of range", Config{Rank: 2, Size: 2, Local: []int{0, 1}, KV: kv}},
		{"negative rank", Config{Rank: -1, Size: 2, Local: []int{0, 1}, KV: kv}},
		{"rank not local", Config{Rank: 0, Size: 3, Local: []int{1, 2}, KV: kv}},
		{"unsorted local", Config{Rank: 0, Size: 3, Local: []int{1, 0}, KV: kv}},
		{"duplicate local", Config{Rank: 0, Size: 3, Local: []int{0, 0, 1}, KV: kv}},
		{"local out of range", Config{Rank: 0, Size: 2, Local: []int{0, 2}, KV: kv}},
		{"no store", Config{Rank: 0, Size: 2, Local: []int{0, 1}}},
		{"tiny slots", Config{Rank: 0, Size: 2, Local: []int{0, 1}, KV: kv, SlotBytes: 100}},
		{"one slot", Config{Rank: 0, Size: 2, Local: []int{0, 1}, KV: kv, Slots: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := New(context.Background(), tc.cfg)
			if !errors.Is(err, errs.ErrInvalidArgument) {
				t.Errorf("New = %v, %v; want ErrInvalidArgument", tr, err)
			}
		})
	}
}

func TestBadCalls(t *testing.T) {
	trs := newLocalGroup(t, 2, "default")
	single, err := New(context.Background(), Config{Rank: 3, Size: 5, Local: []int{3}})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	if single.Rank() != 3 || single.Size() != 5 {
		t.Errorf("Rank, Size = %d, %d; want 3, 5", single.Rank(), single.Size())
	}
	fp := fpFor(0, 0)
	for _, tc := range []struct {
		name string
		tr   *Transport
		peer int
	}{
		{"self", trs[0], 0}, {"negative", trs[0], -1}, {"beyond size", trs[0], 2},
		{"alone", single, 0}, {"alone self", single, 3},
	} {
		if err := tc.tr.Send(context.Background(), tc.peer, &fp, nil); !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("%s: Send = %v, want ErrInvalidArgument", tc.name, err)
		}
		if err := tc.tr.Recv(context.Background(), tc.peer, &fp, nil); !errors.Is(err, errs.ErrInvalidArgument) {
			t.Errorf("%s: Recv = %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	if err := trs[0].Send(context.Background(), 1, nil, nil); !errors.Is(err, errs.ErrInvalidArgument) {
		t.Errorf("Send with nil fingerprint = %v, want ErrInvalidArgument", err)
	}
}

// runLocal runs a multi-process scenario with goroutines as ranks.
func runLocal(t *testing.T, size int, name, variant string) {
	trs := newLocalGroup(t, size, variant)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, tr := range trs {
		wg.Go(func() {
			if err := roles[name](ctx, tr); err != nil {
				t.Errorf("rank %d: %v", tr.Rank(), err)
			}
		})
	}
	wg.Wait()
	for _, tr := range trs {
		tr.Close()
	}
	if l := leftovers(os.Getpid()); len(l) > 0 {
		t.Errorf("segments left: %v", l)
	}
}

func TestLocalScenarios(t *testing.T) {
	for _, tc := range []struct {
		name, variant string
		size          int
	}{
		{"sizes", "default", 2}, {"sizes", "fallback", 2}, {"sizes", "odd", 2},
		{"allpairs", "default", 3}, {"allpairs", "small", 4}, {"allpairs", "yield", 4},
		{"sizes", "yield", 2}, {"deadline", "yield", 2},
		{"mismatch", "default", 2}, {"mismatch", "nocma", 2},
		{"deadline", "default", 2},
	} {
		t.Run(tc.name+"/"+tc.variant, func(t *testing.T) { runLocal(t, tc.size, tc.name, tc.variant) })
	}
}

func TestClose(t *testing.T) {
	trs := newLocalGroup(t, 3, "default")
	ctx := context.Background()
	fp := fpFor(1, 8)
	pending := make(chan error, 1)
	go func() { pending <- trs[0].Recv(ctx, 2, &fp, make([]byte, 8)) }()
	peerWaiting := make(chan error, 1)
	go func() { peerWaiting <- trs[1].Recv(ctx, 0, &fp, make([]byte, 8)) }()
	awaitAsleep(t, trs[0], 2, false)
	awaitAsleep(t, trs[1], 0, false)
	w := startWatch()
	if err := trs[0].Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-pending; !errors.Is(err, errs.ErrClosed) {
		t.Errorf("call pending during Close: got %v, want ErrClosed", err)
	}
	if el, late := w.late(0); late {
		t.Errorf("Close took %v", el)
	}
	peerErr(t, "peer waiting on a closed rank", <-peerWaiting, 0, errs.ErrPeerLost)
	if err := trs[0].Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := trs[0].Send(ctx, 1, &fp, make([]byte, 8)); !errors.Is(err, errs.ErrClosed) {
		t.Errorf("Send after Close: got %v, want ErrClosed", err)
	}
	trs[0].Abort(errors.New("late")) // must not touch the unmapped segment
	// The other two ranks are unaffected.
	go func() { pending <- trs[2].Send(ctx, 1, &fp, make([]byte, 8)) }()
	if err := trs[1].Recv(ctx, 2, &fp, make([]byte, 8)); err != nil {
		t.Errorf("Recv between the remaining ranks: %v", err)
	}
	if err := <-pending; err != nil {
		t.Errorf("Send between the remaining ranks: %v", err)
	}
}

// awaitAsleep returns once tr has a call asleep on its ring with peer:
// a Recv waiting for data (out false) or a Send waiting for space (out
// true). The waiter's flag in the segment is set only around the futex
// sleep, after the polling phases, so a test that acts then acts on a
// call that is really blocked, whatever the machine's load.
func awaitAsleep(t *testing.T, tr *Transport, peer int, out bool) {
	t.Helper()
	r := &tr.peers[peer].in
	flag := r.consWait
	if out {
		r = &tr.peers[peer].out
		flag = r.prodWait
	}
	deadline := time.Now().Add(time.Minute)
	for atomic.LoadUint32(flag) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no call asleep on the ring with rank %d (out=%v)", peer, out)
		}
		time.Sleep(time.Millisecond) // polls a condition; acts only once it holds
	}
}

func TestAbortInProcess(t *testing.T) {
	trs := newLocalGroup(t, 2, "nocma")
	ctx := context.Background()
	fp := fpFor(1, 8)
	local := make(chan error, 2)
	go func() { local <- trs[0].Recv(ctx, 1, &fp, make([]byte, 8)) }()
	go func() { local <- trs[0].Send(ctx, 1, &fp, make([]byte, 8<<20)) }()
	awaitAsleep(t, trs[0], 1, false)
	awaitAsleep(t, trs[0], 1, true)
	w := startWatch()
	trs[0].Abort(errors.New("bad input"))
	trs[0].Abort(errors.New("second abort is ignored"))
	for range 2 {
		err := <-local
		if !errors.Is(err, errs.ErrAborted) || !strings.Contains(err.Error(), "bad input") {
			t.Errorf("local call: got %v, want ErrAborted with the cause", err)
		}
	}
	// The ring holds the start of the abandoned large message: the peer
	// learns that the stream is gone or that rank 0 aborted.
	err := trs[1].Recv(ctx, 0, &fp, make([]byte, 8))
	var pe *errs.PeerError
	if !errors.As(err, &pe) || pe.Peer != 0 || pe.Kind != errs.ErrAborted && pe.Kind != errs.ErrPeerLost {
		t.Errorf("peer call after abort: got %v", err)
	}
	if el, late := w.late(0); late {
		t.Errorf("abort took %v to propagate", el)
	}
}

// TestNoAllocs checks the steady state of Send and Recv does not allocate.
func TestNoAllocs(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("instrumented build")
	}
	for _, size := range []int{8, 100 << 10, 1 << 20} {
		trs := newLocalGroup(t, 2, "default")
		ctx := context.Background()
		done := make(chan error, 1)
		go func() { done <- benchEcho(ctx, trs[1]) }()
		const runs = 200
		most := allocs.Calls(runs)
		if err := sendCmd(ctx, trs[0], cmdPingPong, most, size); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, size)
		calls := 0
		pingPong := func() {
			calls++
			if err := trs[0].Send(ctx, 1, &dataFP, buf); err != nil {
				t.Fatal(err)
			}
			if err := trs[0].Recv(ctx, 1, &dataFP, buf); err != nil {
				t.Fatal(err)
			}
		}
		n := allocs.PerRun(runs, 0, pingPong)
		for calls < most {
			pingPong() // the round trips the echo still expects
		}
		if n != 0 {
			t.Errorf("%d-byte ping-pong allocates %v times per round trip", size, n)
		}
		if err := sendCmd(ctx, trs[0], cmdQuit, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// hostileWrite puts a message header into the ring from rank 1 to rank 0
// behind rank 1's back, then advances head by advance.
// hostileWrite writes hdr as the entry at the producer's position and
// moves head by advance; it stamps the entry only when advance is 1, so
// that a head moved further is seen (by a consumer that finds no stamp).
func hostileWrite(tr *Transport, hdr []byte, advance uint32) {
	r := &tr.peers[0].out
	copy(r.entry(r.pos), hdr)
	if advance == 1 {
		atomic.StoreUint32(r.stamp(r.pos), r.pos+1)
	}
	r.pos += advance
	atomic.StoreUint32(r.head, r.pos)
	futexWakeAll(r.head)
}

func rawHeader(kind uint32, length uint64, seq int, addr uint64) []byte {
	b := make([]byte, hdrSize)
	h := msgHeader{kind: kind, length: length, fp: fpFor(seq, 10), addr: addr}
	h.encode(b)
	return b
}

func TestHostilePeer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hdr     []byte
		advance uint32
		cma     uint32 // handshake state to leave behind
		want    error
	}{
		{"unknown kind", rawHeader(9, 10, 1, 0), 1, 0, errs.ErrPeerLost},
		{"length beyond int", rawHeader(kindInline, 1<<63, 1, 0), 1, 0, errs.ErrPeerLost},
		{"head far ahead", rawHeader(kindInline, 10, 1, 0), 1000, 0, errs.ErrPeerLost},
		{"claims 2^40 bytes", rawHeader(kindInline, 1<<40, 1, 0), 1, 0, context.DeadlineExceeded},
		{"claims 2^40 bytes by single copy", rawHeader(kindCMA, 1<<40, 1, 0), 1, cmaPosted, errs.ErrMismatch},
		{"single copy never posted", rawHeader(kindCMA, 10, 1, 0), 1, cmaIdle, errs.ErrPeerLost},
		{"single copy of a bad address", rawHeader(kindCMA, 10, 1, 8), 1, cmaPosted, context.DeadlineExceeded},
		{"fingerprint from elsewhere", rawHeader(kindInline, 10, 2, 0), 1, 0, errs.ErrMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trs := newLocalGroup(t, 2, "small")
			atomic.StoreUint32(trs[1].peers[0].out.cma, tc.cma)
			hostileWrite(trs[1], tc.hdr, tc.advance)
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			fp := fpFor(1, 10)
			err := trs[0].Recv(ctx, 1, &fp, make([]byte, 10))
			runtime.ReadMemStats(&after)
			if !errors.Is(err, tc.want) {
				t.Errorf("Recv = %v, want %v", err, tc.want)
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Errorf("Recv allocated %d bytes", grew)
			}
		})
	}
}

// TestUnstampedPosition moves head past a position whose entry was never
// stamped: the consumer must call it a protocol violation, not read it.
func TestUnstampedPosition(t *testing.T) {
	trs := newLocalGroup(t, 2, "small")
	r := &trs[1].peers[0].out
	copy(r.entry(r.pos), rawHeader(kindInline, 10, 1, 0))
	r.pos++
	atomic.StoreUint32(r.head, r.pos)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fp := fpFor(1, 10)
	err := trs[0].Recv(ctx, 1, &fp, make([]byte, 10))
	peerErr(t, "Recv of an unstamped position", err, 1, errs.ErrPeerLost)
}

// TestHostileConsumer moves the tail of a ring backwards: the sender
// must refuse to go on, at the latest when it reads the tail again to
// find room (it writes only slots it knew to be free until then).
func TestHostileConsumer(t *testing.T) {
	trs := newLocalGroup(t, 2, "small")
	atomic.StoreUint32(trs[1].peers[0].in.tail, 1<<31)
	fp := fpFor(1, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	slots := int(trs[0].peers[1].out.slots)
	var err error
	sent := 0
	for ; sent <= slots && err == nil; sent++ {
		err = trs[0].Send(ctx, 1, &fp, make([]byte, 10))
	}
	if sent != slots+1 {
		t.Errorf("the bad tail was noticed at send %d, want %d (the first that needs the tail)", sent, slots+1)
	}
	peerErr(t, "Send into a ring with a bad tail", err, 1, errs.ErrPeerLost)
	if err := trs[0].Send(context.Background(), 1, &fp, nil); !errors.Is(err, errs.ErrPeerLost) {
		t.Errorf("Send on the broken ring: got %v, want ErrPeerLost", err)
	}
}

func FuzzHostileRing(f *testing.F) {
	f.Add(rawHeader(kindInline, 10, 1, 0), uint8(1), uint32(0))
	f.Add(rawHeader(kindInline, 5000, 1, 0), uint8(2), uint32(0))
	f.Add(rawHeader(kindCMA, 10, 1, 0), uint8(1), cmaPosted)
	f.Add(rawHeader(kindCMA, 1<<40, 3, 0), uint8(1), cmaPosted)
	f.Add([]byte{1}, uint8(200), uint32(7))
	f.Fuzz(func(t *testing.T, hdr []byte, advance uint8, cma uint32) {
		trs := newLocalGroup(t, 2, "small")
		atomic.StoreUint32(trs[1].peers[0].out.cma, cma)
		hostileWrite(trs[1], hdr, uint32(advance))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		fp := fpFor(1, 10)
		err := trs[0].Recv(ctx, 1, &fp, make([]byte, 10))
		var me *errs.MismatchError
		var pe *errs.PeerError
		if err != nil && !errors.As(err, &me) && !errors.As(err, &pe) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Recv = %v", err)
		}
	})
}

func TestNewTimesOut(t *testing.T) {
	for _, rank := range []int{0, 1} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		kv := newMemKV()
		if rank == 1 { // a segment name nobody will attach to
			kv.Set(ctx, segmentKey, []byte(namePrefix+"1-0"))
		}
		_, err := New(ctx, Config{Rank: rank, Size: 2, Local: []int{0, 1}, KV: kv})
		cancel()
		if err == nil {
			t.Errorf("rank %d: New succeeded without a peer", rank)
		}
		if l := leftovers(os.Getpid()); len(l) > 0 {
			t.Errorf("rank %d: segments left: %v", rank, l)
		}
	}
}

func TestNewDisagreement(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	kv := newMemKV()
	errc := make(chan error, 2)
	go func() {
		_, err := New(ctx, Config{Rank: 0, Size: 3, Local: []int{0, 1}, KV: kv})
		errc <- err
	}()
	go func() {
		_, err := New(ctx, Config{Rank: 1, Size: 3, Local: []int{0, 1, 2}, KV: kv})
		errc <- err
	}()
	for range 2 {
		if err := <-errc; err == nil {
			t.Error("New succeeded for ranks that disagree on the local ranks")
		}
	}
	if l := leftovers(os.Getpid()); len(l) > 0 {
		t.Errorf("segments left: %v", l)
	}
	for _, bad := range []string{"../etc/passwd", namePrefix, "hcomm-shm-1-X", "other"} {
		kv := newMemKV()
		kv.Set(ctx, segmentKey, []byte(bad))
		if _, err := New(ctx, Config{Rank: 1, Size: 2, Local: []int{0, 1}, KV: kv}); err == nil ||
			!strings.Contains(err.Error(), "invalid segment name") {
			t.Errorf("segment name %q: New = %v, want a refusal", bad, err)
		}
	}
}

func TestSweepStale(t *testing.T) {
	// A pid that certainly ended: a child that exited.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	dead := cmd.Process.Pid
	stale := filepath.Join(shmDir, namePrefix+strconv.Itoa(dead)+"-00000000deadbeef")
	fresh := filepath.Join(shmDir, namePrefix+strconv.Itoa(dead)+"-00000000feedf00d")
	live := filepath.Join(shmDir, namePrefix+strconv.Itoa(os.Getpid())+"-00000000cafef00d")
	old := time.Now().Add(-time.Minute)
	for _, p := range []string{stale, fresh, live} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(p)
	}
	os.Chtimes(stale, old, old)
	os.Chtimes(live, old, old)
	sweepStale(&Config{Logger: slog.New(slog.DiscardHandler)})
	for p, want := range map[string]bool{stale: false, fresh: true, live: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
}

// A creator that fails to make the segment (here: its directory is
// missing, as /dev/shm full makes it fail) publishes the failure: the
// other local ranks fail at once with its reason instead of waiting for
// a name until their deadline (issue 11 item 13).
func TestCreatorFailurePublished(t *testing.T) {
	old := shmDir
	shmDir = filepath.Join(t.TempDir(), "missing")
	defer func() { shmDir = old }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv := newMemKV()
	errc := make(chan error, 2)
	for r := range 2 {
		go func() {
			_, err := New(ctx, Config{Rank: r, Size: 2, Local: []int{0, 1}, KV: kv})
			errc <- err
		}()
	}
	for range 2 {
		err := <-errc
		if err == nil {
			t.Fatal("New succeeded without a segment")
		}
		if ctx.Err() != nil {
			t.Fatalf("a rank waited for its deadline: %v", err)
		}
	}
	_, err := New(ctx, Config{Rank: 1, Size: 2, Local: []int{0, 1}, KV: kv})
	if err == nil || !strings.Contains(err.Error(), "creating the shared-memory segment failed") || !strings.Contains(err.Error(), "missing") {
		t.Errorf("attacher's error does not carry the creator's: %v", err)
	}
}

// A creator killed during setup is noticed by the pid it published: the
// attacher fails within a poll, not at its deadline, and removes what the
// creator left (issue 11 item 13).
func TestCreatorDiedDuringSetup(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	dead := cmd.Process.Pid
	old := shmDir
	shmDir = t.TempDir() // not /dev/shm: other tests' leftover checks would see the file
	defer func() { shmDir = old }()
	left := filepath.Join(shmDir, namePrefix+strconv.Itoa(dead)+"-00000000dead0001")
	if err := os.WriteFile(left, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(left)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	kv := newMemKV()
	kv.Set(ctx, creatorKey, []byte(strconv.Itoa(dead)))
	_, err := New(ctx, Config{Rank: 1, Size: 2, Local: []int{0, 1}, KV: kv})
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "exited during setup") {
		t.Fatalf("New with a dead creator = %v (deadline passed: %v), want a prompt \"exited during setup\"", err, ctx.Err() != nil)
	}
	if _, err := os.Stat(left); err == nil {
		t.Errorf("the dead creator's segment %s was not removed", filepath.Base(left))
	}
}

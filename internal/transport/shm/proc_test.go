//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/cpuwait"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Child processes are this test binary started again with these
// variables set; TestMain runs their role instead of the tests.
const (
	envRole    = "HCOMM_SHM_TEST_ROLE"
	envRank    = "HCOMM_SHM_TEST_RANK"
	envSize    = "HCOMM_SHM_TEST_SIZE"
	envKV      = "HCOMM_SHM_TEST_KV"
	envVariant = "HCOMM_SHM_TEST_VARIANT"
	// envHangSetup makes a child creator stop in the middle of its setup.
	envHangSetup = "HCOMM_SHM_TEST_HANG_SETUP"
	// envShmDir replaces /dev/shm for a child, so that a segment a test
	// leaves on purpose is not seen by other tests' leftover checks.
	envShmDir = "HCOMM_SHM_TEST_DIR"
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(runChild(role))
	}
	os.Exit(m.Run())
}

// role is what one rank does in a multi-process test. Scenarios run the
// same role on every rank and branch on the rank inside.
type role func(ctx context.Context, tr *Transport) error

var roles = map[string]role{
	"sizes":    scenarioSizes,
	"allpairs": scenarioAllPairs,
	"mismatch": scenarioMismatch,
	"deadline": scenarioDeadline,
	"idle": func(ctx context.Context, tr *Transport) error {
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
		return nil
	},
	"aborter": func(ctx context.Context, tr *Transport) error {
		// Abort once rank 0's Recv and Send to this rank are both asleep
		// on the rings (blockedCalls), then stay alive until the test
		// releases this rank: rank 0 must learn from the abort flag, not
		// from this process's death.
		pe := tr.peers[0]
		if err := awaitFlags(ctx, pe.out.consWait, pe.in.prodWait); err != nil {
			return err
		}
		tr.Abort(errors.New("reason-xyz"))
		awaitRelease()
		return nil
	},
	"victim": func(ctx context.Context, tr *Transport) error {
		fp := fpFor(1, 10)
		err := tr.Recv(ctx, 0, &fp, make([]byte, 10))
		var pe *errs.PeerError
		if !errors.As(err, &pe) || pe.Peer != 0 || !errors.Is(err, errs.ErrAborted) ||
			!strings.Contains(err.Error(), "parent-reason") {
			return fmt.Errorf("Recv from an aborting rank: got %v, want PeerError(0, aborted, parent-reason)", err)
		}
		return nil
	},
	"echo": benchEcho,
}

func runChild(name string) int {
	rank, _ := strconv.Atoi(os.Getenv(envRank))
	size, _ := strconv.Atoi(os.Getenv(envSize))
	fn := roles[name]
	if fn == nil {
		fmt.Fprintf(os.Stderr, "unknown role %q\n", name)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := Config{
		Rank: rank, Size: size, Local: localRanks(size), KV: fileKV{os.Getenv(envKV)},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	variantConfig(os.Getenv(envVariant), &cfg)
	if os.Getenv(envHangSetup) != "" {
		setupHook = func() { select {} } // killed here by the test
	}
	if d := os.Getenv(envShmDir); d != "" {
		shmDir = d
	}
	tr, err := New(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: New: %v\n", rank, err)
		return 2
	}
	defer tr.Close()
	if err := fn(ctx, tr); err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", rank, err)
		return 1
	}
	return 0
}

// cluster is a multi-process test: this process is one rank, children
// are the others.
type cluster struct {
	t       testing.TB
	size    int
	rank    int // this process's rank
	variant string
	kv      fileKV
	kids    map[int]*kid
}

type kid struct {
	cmd    *exec.Cmd
	in     io.WriteCloser // the child's standard input, closed by release
	stderr string
	done   chan struct{}
	err    error
}

func startCluster(t testing.TB, size, rank int, role, variant string) *cluster {
	t.Helper()
	dir := t.TempDir()
	c := &cluster{t: t, size: size, rank: rank, variant: variant, kv: fileKV{dir}, kids: map[int]*kid{}}
	for r := range size {
		if r == rank {
			continue
		}
		k := &kid{stderr: filepath.Join(dir, fmt.Sprintf("rank%d.stderr", r)), done: make(chan struct{})}
		f, err := os.Create(k.stderr)
		if err != nil {
			t.Fatal(err)
		}
		k.cmd = exec.Command(os.Args[0])
		k.cmd.Env = append(os.Environ(), envRole+"="+role, envRank+"="+strconv.Itoa(r),
			envSize+"="+strconv.Itoa(size), envKV+"="+dir, envVariant+"="+variant)
		k.cmd.Stdout, k.cmd.Stderr = f, f
		if k.in, err = k.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := k.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		go func() { k.err = k.cmd.Wait(); close(k.done) }()
		c.kids[r] = k
	}
	t.Cleanup(func() {
		for _, k := range c.kids {
			k.cmd.Process.Kill()
			<-k.done
		}
	})
	return c
}

// transport joins this process to the cluster.
func (c *cluster) transport() *Transport {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Rank: c.rank, Size: c.size, Local: localRanks(c.size), KV: c.kv}
	variantConfig(c.variant, &cfg)
	tr, err := New(ctx, cfg)
	if err != nil {
		c.t.Fatalf("New: %v", err)
	}
	c.t.Cleanup(func() { tr.Close() })
	return tr
}

// pids returns the process ids of every rank.
func (c *cluster) pids() []int {
	p := []int{os.Getpid()}
	for _, k := range c.kids {
		p = append(p, k.cmd.Process.Pid)
	}
	return p
}

// wait waits for every child and fails the test for those that failed.
func (c *cluster) wait() {
	c.t.Helper()
	for r, k := range c.kids {
		select {
		case <-k.done:
		case <-time.After(15 * time.Second):
			c.t.Errorf("rank %d did not exit", r)
			k.cmd.Process.Kill()
			<-k.done
			continue
		}
		if k.err != nil && !c.killed(r) {
			out, _ := os.ReadFile(k.stderr)
			c.t.Errorf("rank %d: %v\n%s", r, k.err, out)
		}
	}
}

// release closes rank r's standard input: a child waiting in
// awaitRelease goes on.
func (c *cluster) release(r int) { c.kids[r].in.Close() }

// awaitRelease waits until the test releases this child process (or
// exits).
func awaitRelease() { io.Copy(io.Discard, os.Stdin) }

// awaitFlags polls until every word is non-zero (a waiter flag or a
// ring's broken flag in the segment, written by another rank), or ctx
// ends.
func awaitFlags(ctx context.Context, words ...*uint32) error {
	for _, w := range words {
		for atomic.LoadUint32(w) == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("waiting for a flag in the segment: %w", err)
			}
			time.Sleep(time.Millisecond) // polls a condition; acts only once it holds
		}
	}
	return nil
}

func (c *cluster) killed(r int) bool {
	st, ok := c.kids[r].cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && st.Signaled() && st.Signal() == syscall.SIGKILL
}

func (c *cluster) kill(r int) {
	c.kids[r].cmd.Process.Signal(syscall.SIGKILL)
}

func (c *cluster) assertNoLeftovers() {
	c.t.Helper()
	if l := leftovers(c.pids()...); len(l) > 0 {
		c.t.Errorf("segments left in %s: %v", shmDir, l)
	}
}

// runScenario runs role on every rank, this process being rank 0.
func runScenario(t *testing.T, size int, name, variant string) {
	c := startCluster(t, size, 0, name, variant)
	tr := c.transport()
	c.assertNoLeftovers()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if err := roles[name](ctx, tr); err != nil {
		t.Errorf("rank 0: %v", err)
	}
	c.wait()
	if err := tr.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	c.assertNoLeftovers()
}

// slack bounds how late a call may notice a deadline, an abort or a dead
// peer. It is generous: the tests share two cores with other work, and
// the design targets (20 ms sleeps, a liveness check after 100 ms) are far
// below it.
const slack = 900 * time.Millisecond

// stopwatch times a call against slack plus the time this process was
// kept from a CPU meanwhile (cpuwait): on a loaded machine that wait is
// the machine's, not the call's.
type stopwatch struct {
	start time.Time
	wait  time.Duration
}

func startWatch() stopwatch { return stopwatch{time.Now(), cpuwait.Total()} }

// late returns the time since the start and whether it exceeds d plus
// slack plus the CPU wait since the start.
func (w stopwatch) late(d time.Duration) (time.Duration, bool) {
	el := time.Since(w.start)
	return el, el > d+slack+(cpuwait.Total()-w.wait)
}

var testSizes = []int{0, 1, 7, 63, 64, 65, 4031, 4032, 4033, 4095, 4096, 4097, 5000, 5056, 5057, 15170, 65539,
	128 << 10, 128<<10 + 1, 256 << 10, 256<<10 + 1, 1<<20 + 17, 4<<20 + 3}

// scenarioSizes: rank 0 sends every size to rank 1, which checks it and
// answers with a different pattern.
func scenarioSizes(ctx context.Context, tr *Transport) error {
	buf := make([]byte, 4<<20+3)
	for i, n := range testSizes {
		fp, back := fpFor(i, n), fpFor(i+1000, n)
		b := buf[:n]
		if tr.Rank() == 0 {
			fill(b, i)
			if err := tr.Send(ctx, 1, &fp, b); err != nil {
				return fmt.Errorf("send %d bytes: %w", n, err)
			}
			clear(b)
			if err := tr.Recv(ctx, 1, &back, b); err != nil {
				return fmt.Errorf("receive %d bytes back: %w", n, err)
			}
			if err := check(b, i+1000); err != nil {
				return fmt.Errorf("answer of %d bytes: %w", n, err)
			}
			continue
		}
		if err := tr.Recv(ctx, 0, &fp, b); err != nil {
			return fmt.Errorf("receive %d bytes: %w", n, err)
		}
		if err := check(b, i); err != nil {
			return fmt.Errorf("message of %d bytes: %w", n, err)
		}
		fill(b, i+1000)
		if err := tr.Send(ctx, 0, &back, b); err != nil {
			return fmt.Errorf("send %d bytes back: %w", n, err)
		}
	}
	return nil
}

// scenarioAllPairs: every rank sends a stream of mixed sizes to every
// other rank while receiving theirs, all at once.
func scenarioAllPairs(ctx context.Context, tr *Transport) error {
	const count = 30
	sizes := []int{0, 1, 1000, 70001, 300007, 5, 9000}
	seed := func(from, to, i int) int { return from*1000 + to*100 + i }
	var wg sync.WaitGroup
	errc := make(chan error, 2*tr.Size())
	for _, peer := range localRanks(tr.Size()) {
		if peer == tr.Rank() {
			continue
		}
		wg.Go(func() {
			buf := make([]byte, 300007)
			for i := range count {
				n := sizes[(i+tr.Rank())%len(sizes)]
				fill(buf[:n], seed(tr.Rank(), peer, i))
				fp := fpFor(i, n)
				if err := tr.Send(ctx, peer, &fp, buf[:n]); err != nil {
					errc <- fmt.Errorf("send #%d to %d: %w", i, peer, err)
					return
				}
			}
		})
		wg.Go(func() {
			buf := make([]byte, 300007)
			for i := range count {
				n := sizes[(i+peer)%len(sizes)]
				fp := fpFor(i, n)
				if err := tr.Recv(ctx, peer, &fp, buf[:n]); err != nil {
					errc <- fmt.Errorf("receive #%d from %d: %w", i, peer, err)
					return
				}
				if err := check(buf[:n], seed(peer, tr.Rank(), i)); err != nil {
					errc <- fmt.Errorf("message #%d from %d: %w", i, peer, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return errors.Join(func() (all []error) {
		for err := range errc {
			all = append(all, err)
		}
		return all
	}()...)
}

// scenarioMismatch: rank 1 sends messages rank 0 does not expect; rank 0
// must report each one and stay in step for the messages after them.
func scenarioMismatch(ctx context.Context, tr *Transport) error {
	type msg struct {
		sent, want     wire.Fingerprint
		sentN, wantN   int
		detail         string // "" when the message must arrive
		lengthMismatch bool
	}
	msgs := []msg{
		{sent: fpFor(1, 100), want: fpFor(2, 100), sentN: 100, wantN: 100, detail: "fingerprint"},
		{sent: fpFor(3, 100), want: fpFor(3, 100), sentN: 100, wantN: 50, detail: "100 bytes vs 50 bytes", lengthMismatch: true},
		{sent: fpFor(4, 1<<20), want: fpFor(5, 1<<20), sentN: 1 << 20, wantN: 1 << 20, detail: "fingerprint"},
		{sent: fpFor(6, 9), want: fpFor(6, 9), sentN: 300000, wantN: 299999, detail: "300000 bytes vs 299999 bytes", lengthMismatch: true},
		{sent: fpFor(7, 0), want: fpFor(7, 0), sentN: 0, wantN: 1, detail: "0 bytes vs 1 bytes", lengthMismatch: true},
		{sent: fpFor(8, 1000), want: fpFor(8, 1000), sentN: 1000, wantN: 1000},
		{sent: fpFor(9, 1<<20), want: fpFor(9, 1<<20), sentN: 1 << 20, wantN: 1 << 20},
	}
	buf := make([]byte, 1<<20)
	for i, m := range msgs {
		if tr.Rank() == 1 {
			fill(buf[:m.sentN], i)
			if err := tr.Send(ctx, 0, &m.sent, buf[:m.sentN]); err != nil {
				return fmt.Errorf("send #%d: %w", i, err)
			}
			continue
		}
		b := buf[:m.wantN]
		for j := range b {
			b[j] = 0xee
		}
		err := tr.Recv(ctx, 1, &m.want, b)
		if m.detail == "" {
			if err != nil {
				return fmt.Errorf("message #%d after mismatches: %w", i, err)
			}
			if err := check(b, i); err != nil {
				return fmt.Errorf("message #%d after mismatches: %w", i, err)
			}
			continue
		}
		var me *errs.MismatchError
		if !errors.As(err, &me) || !errors.Is(err, errs.ErrMismatch) {
			return fmt.Errorf("message #%d: got %v, want a mismatch (%s)", i, err, m.detail)
		}
		wantDetail := ""
		if m.lengthMismatch {
			wantDetail = m.detail
		}
		if me.Peer != 1 || me.Local != m.want || me.Remote != m.sent || me.Detail != wantDetail {
			return fmt.Errorf("message #%d: got %+v, want peer 1, local %v, remote %v, detail %q",
				i, me, m.want, m.sent, wantDetail)
		}
		for j, v := range b {
			if v != 0xee {
				return fmt.Errorf("message #%d: mismatched message wrote byte %d of the buffer", i, j)
			}
		}
	}
	return nil
}

// scenarioDeadline: timed-out and cancelled receives return in time and
// leave the stream usable; a large send that times out breaks it.
func scenarioDeadline(ctx context.Context, tr *Transport) error {
	big := make([]byte, 4<<20)
	goFP, dataFP, bigFP := fpFor(1, 1), fpFor(2, 1<<20), fpFor(3, len(big))
	if tr.Rank() == 1 {
		if err := tr.Recv(ctx, 0, &goFP, make([]byte, 1)); err != nil {
			return err
		}
		fill(big[:1<<20], 2)
		if err := tr.Send(ctx, 0, &dataFP, big[:1<<20]); err != nil {
			return err
		}
		// Rank 0 now posts a large message and gives up before we look:
		// wait until its abandoned send has broken the ring.
		if err := awaitFlags(ctx, tr.peers[0].in.broken); err != nil {
			return err
		}
		err := tr.Recv(ctx, 0, &bigFP, big)
		var pe *errs.PeerError
		if !errors.As(err, &pe) || pe.Peer != 0 || !errors.Is(err, errs.ErrPeerLost) {
			return fmt.Errorf("receive of an abandoned message: got %v, want a broken stream", err)
		}
		return nil
	}
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(ctx)
			time.AfterFunc(50*time.Millisecond, cancel)
			return c, cancel
		}, context.Canceled},
	} {
		w := startWatch() // before the context's timer starts
		c, cancel := tc.ctx()
		err := tr.Recv(c, 1, &dataFP, big[:1<<20])
		cancel()
		if el, late := w.late(0); !errors.Is(err, tc.want) || el < 40*time.Millisecond || late {
			return fmt.Errorf("%s: Recv returned %v after %v, want %v after about 50ms", tc.name, err, el, tc.want)
		}
	}
	if err := tr.Send(ctx, 1, &goFP, []byte{1}); err != nil {
		return err
	}
	if err := tr.Recv(ctx, 1, &dataFP, big[:1<<20]); err != nil {
		return fmt.Errorf("receive after timeouts: %w", err)
	}
	if err := check(big[:1<<20], 2); err != nil {
		return fmt.Errorf("receive after timeouts: %w", err)
	}
	c, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	w := startWatch()
	if tr.cmaThreshold == 0 {
		big = append(big, make([]byte, 4<<20)...) // more than the ring holds
	}
	err := tr.Send(c, 1, &bigFP, big)
	if el, late := w.late(0); !errors.Is(err, context.DeadlineExceeded) || late {
		return fmt.Errorf("Send returned %v after %v, want a deadline error after about 50ms", err, el)
	}
	if err := tr.Send(ctx, 1, &goFP, []byte{1}); !errors.Is(err, errs.ErrPeerLost) {
		return fmt.Errorf("Send after an abandoned send: got %v, want a broken stream", err)
	}
	return nil
}

func TestProcessSizes(t *testing.T) {
	for _, v := range []string{"default", "nocma", "fallback", "small", "odd"} {
		t.Run(v, func(t *testing.T) { runScenario(t, 2, "sizes", v) })
	}
}

func TestProcessAllPairs(t *testing.T) {
	for _, tc := range []struct {
		size    int
		variant string
	}{{4, "default"}, {3, "small"}, {3, "fallback"}} {
		t.Run(fmt.Sprintf("n=%d/%s", tc.size, tc.variant), func(t *testing.T) {
			runScenario(t, tc.size, "allpairs", tc.variant)
		})
	}
}

func TestProcessMismatch(t *testing.T) {
	for _, v := range []string{"default", "nocma", "fallback"} {
		t.Run(v, func(t *testing.T) { runScenario(t, 2, "mismatch", v) })
	}
}

func TestProcessDeadline(t *testing.T) {
	for _, v := range []string{"default", "nocma"} {
		t.Run(v, func(t *testing.T) { runScenario(t, 2, "deadline", v) })
	}
}

// peerErr checks that err is a PeerError about peer of the given kind.
func peerErr(t *testing.T, what string, err error, peer int, kind error) {
	t.Helper()
	var pe *errs.PeerError
	if !errors.As(err, &pe) || pe.Peer != peer || pe.Kind != kind || !errors.Is(err, kind) {
		t.Errorf("%s: got %v, want PeerError(%d, %v)", what, err, peer, kind)
	}
}

// blockedCalls starts a Recv from peer and a Send to peer of a message
// larger than the ring, and returns their results as they come.
func blockedCalls(tr *Transport, peer int) <-chan error {
	out := make(chan error, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() {
		fp := fpFor(1, 8)
		out <- fmt.Errorf("Recv: %w", tr.Recv(ctx, peer, &fp, make([]byte, 8)))
	})
	wg.Go(func() {
		fp := fpFor(2, 4<<20)
		out <- fmt.Errorf("Send: %w", tr.Send(ctx, peer, &fp, make([]byte, 4<<20)))
	})
	go func() { wg.Wait(); cancel() }()
	return out
}

func TestProcessPeerAborts(t *testing.T) {
	for _, v := range []string{"default", "nocma"} {
		t.Run(v, func(t *testing.T) {
			c := startCluster(t, 2, 0, "aborter", v)
			tr := c.transport()
			w := startWatch()
			results := blockedCalls(tr, 1)
			for range 2 {
				err := <-results
				peerErr(t, "call waiting on an aborting rank", err, 1, errs.ErrAborted)
				if !strings.Contains(err.Error(), "reason-xyz") {
					t.Errorf("error %q does not carry the peer's reason", err)
				}
			}
			// The peer aborts as soon as both calls are asleep.
			if el, late := w.late(200 * time.Millisecond); late {
				t.Errorf("calls failed after %v", el)
			}
			c.release(1)
			c.wait()
			tr.Close()
			c.assertNoLeftovers()
		})
	}
}

func TestProcessAbortReachesPeer(t *testing.T) {
	c := startCluster(t, 2, 0, "victim", "default")
	tr := c.transport()
	result := make(chan error, 1)
	go func() {
		fp := fpFor(1, 8)
		result <- tr.Recv(context.Background(), 1, &fp, make([]byte, 8))
	}()
	awaitAsleep(t, tr, 1, false)
	w := startWatch()
	tr.Abort(errors.New("parent-reason"))
	if err := <-result; !errors.Is(err, errs.ErrAborted) || !strings.Contains(err.Error(), "parent-reason") {
		t.Errorf("pending call after Abort: got %v, want ErrAborted with the cause", err)
	}
	if el, late := w.late(0); late {
		t.Errorf("pending call returned %v after Abort", el)
	}
	fp := fpFor(9, 0)
	if err := tr.Send(context.Background(), 1, &fp, nil); !errors.Is(err, errs.ErrAborted) {
		t.Errorf("Send after Abort: got %v, want ErrAborted", err)
	}
	c.wait()
	tr.Close()
	c.assertNoLeftovers()
}

func TestProcessPeerKilled(t *testing.T) {
	for _, v := range []string{"default", "nocma", "small"} {
		t.Run(v, func(t *testing.T) {
			c := startCluster(t, 2, 0, "idle", v)
			tr := c.transport()
			results := blockedCalls(tr, 1)
			awaitAsleep(t, tr, 1, false) // both calls are blocked mid-transfer
			awaitAsleep(t, tr, 1, true)
			w := startWatch()
			c.kill(1)
			for range 2 {
				peerErr(t, "call waiting on a killed rank", <-results, 1, errs.ErrPeerLost)
			}
			el, late := w.late(0)
			if late {
				t.Errorf("calls failed %v after the peer was killed", el)
			}
			t.Logf("both calls failed %v after SIGKILL", el)
			c.wait()
			tr.Close()
			c.assertNoLeftovers()
		})
	}
}

// TestProcessCreatorKilled kills the rank that created the segment right
// after setup: nothing may remain in /dev/shm, and the survivor notices.
func TestProcessCreatorKilled(t *testing.T) {
	c := startCluster(t, 2, 1, "idle", "default")
	tr := c.transport()
	c.assertNoLeftovers()
	c.kill(0)
	fp := fpFor(1, 8)
	w := startWatch()
	err := tr.Recv(context.Background(), 0, &fp, make([]byte, 8))
	peerErr(t, "Recv from the killed creator", err, 0, errs.ErrPeerLost)
	if el, late := w.late(0); late {
		t.Errorf("Recv failed after %v", el)
	}
	c.wait()
	c.assertNoLeftovers()
}

// A creator process killed in the middle of its setup (its segment file
// made, its name not yet published): the other local rank fails within a
// poll of its death, not at its deadline, and removes the file the
// creator left (issue 11 item 13).
func TestProcCreatorKilledDuringSetup(t *testing.T) {
	t.Setenv(envHangSetup, "1")
	dir := t.TempDir()
	t.Setenv(envShmDir, dir)
	old := shmDir
	shmDir = dir
	defer func() { shmDir = old }()
	c := startCluster(t, 2, 1, "idle", "")
	kid := c.kids[0]
	prefix := namePrefix + strconv.Itoa(kid.cmd.Process.Pid) + "-"
	var left string
	for left == "" { // the creator has made its file and stopped in setup
		ents, _ := os.ReadDir(shmDir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), prefix) {
				left = filepath.Join(shmDir, e.Name())
			}
		}
		select {
		case <-kid.done:
			t.Fatalf("the creator exited before its setup stopped: %v", kid.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	kid.cmd.Process.Kill()
	<-kid.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := New(ctx, Config{Rank: 1, Size: 2, Local: []int{0, 1}, KV: c.kv})
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "exited during setup") {
		t.Fatalf("New after the creator was killed = %v (deadline passed: %v), want a prompt \"exited during setup\"", err, ctx.Err() != nil)
	}
	if _, err := os.Stat(left); err == nil {
		os.Remove(left)
		t.Errorf("the killed creator's segment %s was left", filepath.Base(left))
	}
}

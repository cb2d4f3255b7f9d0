package hcomm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The multi-process tests run this test binary as the ranks of a real job:
// separate processes meeting through a real store, talking through shared
// memory or TCP.

const childEnv = "HCOMM_TEST_CHILD"

// TestRankProcess is the body of one rank; it does nothing unless started
// as a child by the tests below.
func TestRankProcess(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("runs only as a rank of a multi-process test")
	}
	ctx := context.Background()
	timeout := 2 * time.Minute
	if v := os.Getenv("HCOMM_TEST_TIMEOUT"); v != "" {
		timeout, _ = time.ParseDuration(v)
	}
	cfg := &Config{Timeout: timeout}
	if v := os.Getenv("HCOMM_TEST_HOLD_REPORTS"); v != "" {
		n, _ := strconv.Atoi(v)
		cfg.Logger = slog.New(&holdReports{Handler: slog.NewTextHandler(os.Stderr, nil), dir: os.Getenv("HCOMM_TEST_DIR"), n: n})
	}
	c, err := Init(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	switch mode {
	case "matrix":
		comms := []*Comm{c}
		rankMatrix[float32](t, comms)
		rankMatrix[int64](t, comms)
		rankMatrix[Float16](t, comms)
		rankMatrix[uint8](t, comms)
		rankMatrix[float64](t, comms)
	case "large":
		rankLarge(t, c)
	case "window":
		rankWindowProcess(t, c)
	case "windowkill":
		rankWindowKill(t, c)
	case "alloc":
		rankAllocProcess(t, c)
	case "allockill":
		rankAllocKill(t, c)
	case "allocabandon":
		rankAllocAbandon(t, c)
	case "split":
		rankSplit(t, c)
	case "streams":
		rankStreams(t, c)
	case "kill":
		rankKill(t, c)
	case "killexit":
		rankKillExit(t, c)
	case "lazykill":
		rankLazyKill(t, c)
	case "stop":
		rankStop(t, c)
	case "mismatch":
		rankMismatch(t, c)
	case "p2pstuck":
		rankP2PStuck(t, c)
	case "script":
		rankScript(t, c)
	case "hostile":
		rankHostile(t, c)
	case "bound":
		rankBound(t, c)
	case "spread":
		rankSpread(t, c)
	case "onehost":
		rankOneHost(t, c)
	case "topo":
		rankTopology(t, c)
		rankMatrix[float32](t, []*Comm{c})
		rankLarge(t, c)
	case "barrier":
		if err := c.Barrier(ctx); err != nil {
			t.Fatal(err)
		}
	case "paths":
		rankPaths(t, c)
	case "pathsdown":
		rankPathsDown(t, c)
	case "pathsfail":
		rankPathsFail(t, c)
	case "pathsfirst":
		rankPathsFirst(t, c)
	case "pathsthree":
		rankPathsThree(t, c)
	case "pathsdead":
		rankPathsDead(t, c)
	case "pathsidle":
		rankPathsIdle(t, c)
	case "pathsdup":
		rankPathsDup(t, c)
	case "hosts":
		rankHosts(t, c)
		rankMatrix[float32](t, []*Comm{c})
		rankLarge(t, c)
	default:
		t.Fatalf("unknown child mode %q", mode)
	}
}

// rankMatrix is testMatrix as one rank of a multi-process job: it runs
// the same calls as the in-process matrix on this rank only and checks
// this rank's results.
func rankMatrix[T Element](t *testing.T, comms []*Comm) {
	testMatrixOn[T](t, comms[0])
}

var (
	launcherOnce sync.Once
	launcherPath string
	launcherErr  error
)

// holdReports is a rank's log handler under HCOMM_TEST_HOLD_REPORTS=n: a
// rank that logs a culprit report (a timed-out operation, still in the
// call and not yet failed) waits, up to 20 s, until n ranks of the job
// have logged one, so that each report finds the other ranks still in the
// call whatever the skew of their timeouts. (Without it, a rank timing out
// a few milliseconds after its peer finds the peer gone, or is aborted by
// its failure notice first.)
type holdReports struct {
	slog.Handler
	dir string
	n   int
}

func (h *holdReports) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Message != "hcomm: operation timed out" {
		return err
	}
	os.WriteFile(filepath.Join(h.dir, fmt.Sprintf("reported-%d", os.Getpid())), nil, 0o644)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if got, _ := filepath.Glob(filepath.Join(h.dir, "reported-*")); len(got) >= h.n {
			break
		}
		time.Sleep(5 * time.Millisecond) // polls a condition; acts only once it holds
	}
	return err
}

func (h *holdReports) WithAttrs(as []slog.Attr) slog.Handler {
	return &holdReports{Handler: h.Handler.WithAttrs(as), dir: h.dir, n: h.n}
}

func (h *holdReports) WithGroup(g string) slog.Handler {
	return &holdReports{Handler: h.Handler.WithGroup(g), dir: h.dir, n: h.n}
}

// launcher builds cmd/hcomm once and returns the binary's path.
func launcher(t *testing.T) string {
	t.Helper()
	launcherOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hcomm-launcher")
		if err != nil {
			launcherErr = err
			return
		}
		launcherPath = filepath.Join(dir, "hcomm")
		start := time.Now()
		out, err := exec.Command("go", "build", "-o", launcherPath, "./cmd/hcomm").CombinedOutput()
		if err != nil {
			launcherErr = fmt.Errorf("go build ./cmd/hcomm: %v\n%s", err, out)
		}
		// The first test to need the launcher pays for its build: say so,
		// or that test looks several seconds slower than its twins (the
		// shm case of the first scenario once looked like a slow job end
		// after an Abort).
		t.Logf("built the launcher in %v (once per test binary; this test's time includes it)", time.Since(start).Round(time.Millisecond))
	})
	if launcherErr != nil {
		t.Fatal(launcherErr)
	}
	return launcherPath
}

// spawnJob starts n ranks of this test binary in child mode with
// `hcomm run`, which serves the store and sets the rank variables, and
// returns the launcher's output if it failed.
func spawnJob(t *testing.T, n int, mode string, env ...string) (string, error) {
	t.Helper()
	return launch(t, []string{"-n", strconv.Itoa(n), "--tag-output", "--timeout", "4m"}, nil, mode, env...)
}

// launch runs `prefix... hcomm run flags... -- <test binary> child args`
// and returns its output: all of it, or the last 80 lines if it failed.
func launch(t *testing.T, flags, prefix []string, mode string, env ...string) (string, error) {
	t.Helper()
	argv := append(append([]string{}, prefix...), launcher(t), "run")
	argv = append(argv, flags...)
	argv = append(argv, "--", os.Args[0], "-test.run=^TestRankProcess$", "-test.count=1", "-test.v")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return lastLines(string(out), 80), err
	}
	return string(out), nil
}

func spawnRanks(t *testing.T, n int, mode string, env ...string) (string, error) {
	t.Helper()
	return spawnRanksWith(t, n, mode, nil, nil, env...)
}

// spawnRanksWith starts rank r as prefix(r) followed by the test binary,
// with envFor(r) added to its environment (either may be nil).
func spawnRanksWith(t *testing.T, n int, mode string, prefix, envFor func(r int) []string, env ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var out bytes.Buffer
	var mu sync.Mutex
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		argv := []string{os.Args[0], "-test.run=^TestRankProcess$", "-test.count=1", "-test.v"}
		if prefix != nil {
			argv = append(prefix(r), argv...)
		}
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), childEnv+"="+mode,
			fmt.Sprintf("HCOMM_RANK=%d", r), fmt.Sprintf("HCOMM_SIZE=%d", n))
		cmd.Env = append(cmd.Env, env...)
		if envFor != nil {
			cmd.Env = append(cmd.Env, envFor(r)...)
		}
		var b bytes.Buffer
		cmd.Stdout, cmd.Stderr = &b, &b
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = cmd.Wait()
			mu.Lock()
			defer mu.Unlock()
			if errs[r] != nil {
				fmt.Fprintf(&out, "--- rank %d: %v\n%s", r, errs[r], lastLines(b.String(), 40))
			}
		}()
	}
	wg.Wait()
	return out.String(), errors.Join(errs...)
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func multiSizes() []int {
	if testing.Short() {
		return []int{2, 3}
	}
	return []int{2, 3, 4, 8}
}

// TestMultiProcess runs the correctness matrix with separate processes
// over shared memory and over TCP.
func TestMultiProcess(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, tr := range []string{"shm", "tcp"} {
		for _, n := range multiSizes() {
			t.Run(fmt.Sprintf("%s/n=%d", tr, n), func(t *testing.T) {
				out, err := spawnJob(t, n, "matrix", "HCOMM_TRANSPORT="+tr, "HCOMM_BUFFSIZE=4096")
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
			})
		}
	}
}

// TestMultiProcessYield runs the matrix over shared memory with waits that
// poll with sched_yield (forced on at 2 ranks) and without (forced off at
// 4 ranks, which on a machine with fewer CPUs would otherwise yield).
func TestMultiProcessYield(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, tc := range []struct {
		n     int
		yield string
	}{{2, "1"}, {4, "0"}} {
		t.Run(fmt.Sprintf("n=%d/yield=%s", tc.n, tc.yield), func(t *testing.T) {
			out, err := spawnJob(t, tc.n, "matrix", "HCOMM_TRANSPORT=shm", "HCOMM_BUFFSIZE=4096", "HCOMM_YIELD="+tc.yield)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

// TestMultiProcessChecksum runs the matrix over TCP with CRC32C on every
// frame and results compared across ranks.
func TestMultiProcessChecksum(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	out, err := spawnJob(t, 3, "matrix", "HCOMM_TRANSPORT=tcp", "HCOMM_CHECKSUM=1", "HCOMM_CHECK_RESULTS=1", "HCOMM_NSOCKS=2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestMultiProcessFileStore meets through a file store and splits the
// world into host-local groups.
func TestMultiProcessFileStore(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	dir := t.TempDir()
	out, err := spawnRanks(t, 4, "split", "HCOMM_STORE=file://"+filepath.ToSlash(dir), "HCOMM_TOKEN=x")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// TestMultiProcessLarge runs a large AllReduce over shm (single-copy path)
// and TCP.
func TestMultiProcessLarge(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			out, err := spawnJob(t, 3, "large", "HCOMM_TRANSPORT="+tr, "HCOMM_SHM_CMA=262144")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
}

func rankLarge(t *testing.T, c *Comm) {
	const count = 1000003
	rf := newRef[float32]()
	vs := make([]int64, c.Size())
	for _, op := range []Op{Sum, Max} {
		in := input[float32](c.Rank(), count)
		out := make([]float32, count)
		if err := AllReduce(context.Background(), c, in, out, op); err != nil {
			t.Fatal(err)
		}
		for i := range out {
			for r := range vs {
				vs[r] = val(DTypeFloat32, r, i)
			}
			if want := rf.reduce(op, vs); out[i] != want {
				t.Fatalf("%v element %d = %v, want %v", op, i, out[i], want)
			}
		}
	}
}

func rankSplit(t *testing.T, c *Comm) {
	ctx := context.Background()
	sub, err := c.Split(ctx, c.Rank()%2, c.Rank())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	x := []int32{int32(c.Rank())}
	if err := AllReduce(ctx, sub, x, x, Sum); err != nil {
		t.Fatal(err)
	}
	want := int32(0)
	for r := c.Rank() % 2; r < c.Size(); r += 2 {
		want += int32(r)
	}
	if x[0] != want {
		t.Fatalf("sum over color %d = %d, want %d", c.Rank()%2, x[0], want)
	}
}

// TestMultiProcessTorchrunStyle: with only MASTER_ADDR/MASTER_PORT (and
// torchrun's RANK/WORLD_SIZE), rank 0 serves the store itself.
func TestMultiProcessTorchrunStyle(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	const n = 3
	out, err := spawnRanksWith(t, n, "split", nil, func(r int) []string {
		return []string{"HCOMM_RANK=", "HCOMM_SIZE=", "RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(n),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port, "HCOMM_TOKEN=torchrun-style"}
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

package hcomm

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/boot"
	"github.com/hcomm-go/hcomm/internal/cpuwait"
	"github.com/hcomm-go/hcomm/internal/wire"
	"github.com/hcomm-go/hcomm/store"
)

// Fault tests: real processes started by hcomm run; one of them is killed,
// stopped, disagrees, or is attacked, and every survivor must return a
// clear error in time, with nothing left behind.

// faultDir is where ranks of a fault test leave notes for each other.
func faultDir(t *testing.T) string {
	dir := os.Getenv("HCOMM_TEST_DIR")
	if dir == "" {
		t.Fatal("HCOMM_TEST_DIR not set")
	}
	return dir
}

// survivorLine reports a survivor's outcome to the parent test.
func survivorLine(c *Comm, err error, d time.Duration) {
	kind := "other"
	for _, k := range []struct {
		e    error
		name string
	}{{ErrMismatch, "mismatch"}, {ErrTimeout, "timeout"}, {ErrPeerLost, "peerlost"}, {ErrAborted, "aborted"}} {
		if errors.Is(err, k.e) {
			kind = k.name
			break
		}
	}
	msg, _ := json.Marshal(fmt.Sprint(err))
	// waitms: how long this rank was kept from a CPU since cpuWaitBase
	// (scenarios with a latency bound set it).
	fmt.Printf("SURVIVOR rank=%d kind=%s ms=%d waitms=%d err=%s\n", c.Rank(), kind, d.Milliseconds(), (cpuwait.Total() - cpuWaitBase).Milliseconds(), msg)
}

// rankKill: the last rank kills itself with SIGKILL in the middle of a
// large AllReduce; the others report how they ended.
func rankKill(t *testing.T, c *Comm) {
	signal.Ignore(syscall.SIGTERM) // report before the launcher's SIGKILL
	dir := faultDir(t)
	ctx := context.Background()
	buf := make([]float32, 4<<20) // 16 MiB
	for i := 0; i < 2; i++ {
		if err := AllReduce(ctx, c, buf, buf, Sum); err != nil {
			t.Fatal(err)
		}
	}
	cpuWaitBase = cpuwait.Total()
	victim := c.Size() - 1
	if c.Rank() == victim {
		go func() {
			// Die inside a collective of the loop below, not before it.
			if err := waitRunning(c, 3); err != nil {
				panic(err)
			}
			os.WriteFile(filepath.Join(dir, "killed"), []byte(strconv.FormatInt(time.Now().UnixNano(), 10)), 0o600)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}()
	}
	var err error
	for i := 0; i < 100000 && err == nil; i++ {
		err = AllReduce(ctx, c, buf, buf, Sum)
	}
	end := time.Now()
	b, _ := os.ReadFile(filepath.Join(dir, "killed"))
	ns, _ := strconv.ParseInt(string(b), 10, 64)
	survivorLine(c, err, end.Sub(time.Unix(0, ns)))
}

// rankStop: the last rank stops itself (SIGSTOP) before an AllReduce; the
// others time out and report; rank 0 then kills the stopped rank.
func rankStop(t *testing.T, c *Comm) {
	signal.Ignore(syscall.SIGTERM)
	dir := faultDir(t)
	ctx := context.Background()
	x := make([]int64, 1024)
	if err := AllReduce(ctx, c, x, x, Sum); err != nil {
		t.Fatal(err)
	}
	victim := c.Size() - 1
	if c.Rank() == victim {
		os.WriteFile(filepath.Join(dir, "stopped.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600)
		syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		// The stop reaches this thread asynchronously; wait for it (and
		// for rank 0's SIGKILL) without doing anything observable.
		select {}
	}
	start := time.Now()
	err := AllReduce(ctx, c, x, x, Sum)
	survivorLine(c, err, time.Since(start))
	if c.Rank() == 0 {
		b, _ := os.ReadFile(filepath.Join(dir, "stopped.pid"))
		if pid, _ := strconv.Atoi(string(b)); pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// rankP2PStuck: both ranks wait in a Recv from each other; the Recvs time
// out with culprit reports saying where the peer is.
func rankP2PStuck(t *testing.T, c *Comm) {
	ctx := context.Background()
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := Recv(ctx, c, make([]float32, 4), 1-c.Rank(), 7)
	survivorLine(c, err, time.Since(start))
}

// rankMismatch: the last rank disagrees about a call, as
// HCOMM_TEST_MISMATCH says (count, op, skip).
func rankMismatch(t *testing.T, c *Comm) {
	ctx := context.Background()
	odd := c.Rank() == c.Size()-1
	count, op := 1000, Sum
	switch os.Getenv("HCOMM_TEST_MISMATCH") {
	case "count":
		if odd {
			count = 1025
		}
	case "op":
		if odd {
			op = Max
		}
	case "skip":
		if !odd {
			if err := c.Barrier(ctx); err != nil {
				survivorLine(c, err, 0)
				return
			}
		}
	}
	x := make([]float32, count)
	start := time.Now()
	var err error
	switch os.Getenv("HCOMM_TEST_MISMATCH") {
	case "bcast": // the odd rank broadcasts from itself
		if odd {
			err = Broadcast(ctx, c, x, c.Rank())
		} else {
			err = AllReduce(ctx, c, x, x, op)
		}
	case "root": // the odd rank names another root
		root := 0
		if odd {
			root = c.Size() - 1
		}
		err = Reduce(ctx, c, x, x, op, root)
	default:
		err = AllReduce(ctx, c, x, x, op)
	}
	if err == nil {
		// A rank whose odd call completed learns of the mismatch at its
		// next call.
		err = c.Barrier(ctx)
	}
	survivorLine(c, err, time.Since(start))
}

// rankHostile: while the ranks run collectives over TCP, rank 0 attacks
// rank 1's data port: random bytes, a handshake with a wrong token, a frame
// claiming 2^40 bytes. The job must go on and get the right results.
func rankHostile(t *testing.T, c *Comm) {
	ctx := context.Background()
	if c.Rank() == 0 {
		st, err := store.Open(ctx, os.Getenv("HCOMM_STORE"), os.Getenv("HCOMM_TOKEN"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := st.Get(ctx, "hcomm/world/card/1")
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		var card boot.Card
		if err := json.Unmarshal(v, &card); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			attack(t, card.Addr)
		}()
	}
	for i := 0; i < 200; i++ {
		x := []int64{int64(c.Rank() + i), 1}
		if err := AllReduce(ctx, c, x, x, Sum); err != nil {
			t.Fatalf("collective %d during the attack: %v", i, err)
		}
		if want := int64(c.Size()*(c.Size()-1)/2 + c.Size()*i); x[0] != want || x[1] != int64(c.Size()) {
			t.Fatalf("collective %d: %v, want [%d %d]", i, x, want, c.Size())
		}
		time.Sleep(time.Millisecond)
	}
}

func attack(t *testing.T, addr string) {
	send := func(what string, b []byte) {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Errorf("%s: dial %s: %v", what, addr, err)
			return
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		conn.Write(b)
		// The transport must close the connection, not wait for more.
		one := make([]byte, 512)
		for {
			if _, err := conn.Read(one); err != nil {
				return
			}
		}
	}
	junk := make([]byte, 4096)
	rand.Read(junk)
	send("random bytes", junk)
	hs := wire.Handshake{Version: wire.HandshakeVersion, CommID: 1, Rank: 0, Target: 1, Size: 2, Socket: 0, Sockets: 1}
	rand.Read(hs.Nonce[:])
	hb := make([]byte, wire.HandshakeSize+wire.ProofSize)
	hs.MarshalTo(hb)
	rand.Read(hb[wire.HandshakeSize:]) // a proof without the token
	send("wrong token", hb)
	fh := wire.FrameHeader{Type: wire.FrameData, Len: 1 << 40, Total: 1 << 40}
	fb := make([]byte, wire.FrameHeaderSize)
	fh.MarshalTo(fb)
	send("2^40-byte frame", fb)
	send("truncated handshake", hb[:20])
}

// faultJob runs a fault test's ranks with the launcher and returns its
// output (whatever the exit status) and the SURVIVOR lines by rank.
func faultJob(t *testing.T, n int, mode string, env ...string) (string, map[int]map[string]string, error) {
	t.Helper()
	return faultJobFlags(t, n, mode, nil, env...)
}

// faultJobFlags is faultJob with more `hcomm run` flags.
func faultJobFlags(t *testing.T, n int, mode string, more []string, env ...string) (string, map[int]map[string]string, error) {
	t.Helper()
	dir := t.TempDir()
	jobTimeout := "2m"
	if v := os.Getenv("HCOMM_TEST_JOB_TIMEOUT"); v != "" {
		jobTimeout = v
	}
	flags := append([]string{"-n", strconv.Itoa(n), "--tag-output", "--timeout", jobTimeout}, more...)
	argv := append([]string{launcher(t), "run"}, flags...)
	argv = append(argv, "--", os.Args[0], "-test.run=^TestRankProcess$", "-test.count=1", "-test.v")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), childEnv+"="+mode, "HCOMM_TEST_DIR="+dir), env...)
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	lines := taggedLines(out, "SURVIVOR ", 5)
	leftovers(t, dir)
	return out, lines, err
}

// leftovers fails the test if a process of the job (found by its
// HCOMM_TEST_DIR) or a shared-memory segment survived it.
func leftovers(t *testing.T, dir string) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), "HCOMM_TEST_DIR="+dir+"\x00") {
			t.Errorf("process %s of the job is still running", filepath.Base(filepath.Dir(p)))
		}
	}
	segs, _ := filepath.Glob("/dev/shm/hcomm-*")
	for _, s := range segs {
		// Segments of other, concurrent tests are named after their
		// creator; report only those whose creator is gone.
		if pid := segmentPid(s); pid > 0 {
			if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
				t.Errorf("shared-memory segment %s left behind", s)
			}
		}
	}
}

func segmentPid(path string) int {
	parts := strings.Split(filepath.Base(path), "-")
	for _, p := range parts {
		if n, err := strconv.Atoi(p); err == nil {
			return n
		}
	}
	return 0
}

func TestFaultKill(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			out, surv, err := faultJob(t, 4, "kill", "HCOMM_TRANSPORT="+tr)
			if err == nil {
				t.Fatalf("the launcher exited 0 after a rank was killed:\n%s", out)
			}
			if !strings.Contains(out, "rank 3 (pid") || !strings.Contains(out, "killed by signal") {
				t.Errorf("the launcher did not name rank 3 as killed:\n%s", lastLines(out, 30))
			}
			// 2 s, and the longest a survivor was kept from a CPU.
			waitMS := 0
			for r := 0; r < 3; r++ {
				w, _ := strconv.Atoi(surv[r]["waitms"])
				waitMS = max(waitMS, w)
			}
			for r := 0; r < 3; r++ {
				s, ok := surv[r]
				if !ok {
					t.Errorf("rank %d did not report:\n%s", r, lastLines(out, 30))
					continue
				}
				if s["kind"] != "peerlost" && s["kind"] != "aborted" {
					t.Errorf("rank %d ended with %s: %s", r, s["kind"], s["err"])
				}
				if !strings.Contains(s["err"], "rank 3") {
					t.Errorf("rank %d's error does not name rank 3: %s", r, s["err"])
				}
				if ms, _ := strconv.Atoi(s["ms"]); ms > 2000+waitMS {
					t.Errorf("rank %d returned %d ms after the kill, want within 2 s and the %d ms a survivor waited for a CPU", r, ms, waitMS)
				}
			}
		})
	}
}

func TestFaultStop(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	out, surv, _ := faultJob(t, 4, "stop", "HCOMM_TEST_TIMEOUT=2s")
	for r := 0; r < 3; r++ {
		s, ok := surv[r]
		if !ok {
			t.Errorf("rank %d did not report:\n%s", r, lastLines(out, 30))
			continue
		}
		if s["kind"] != "timeout" && s["kind"] != "aborted" {
			t.Errorf("rank %d ended with %s: %s", r, s["kind"], s["err"])
		}
		if !strings.Contains(s["err"], "rank 3 did not answer") {
			t.Errorf("rank %d's error has no culprit report naming rank 3: %s", r, s["err"])
		}
		if ms, _ := strconv.Atoi(s["ms"]); ms < 1900 || ms > 6000 {
			t.Errorf("rank %d returned after %d ms, want about the 2 s deadline", r, ms)
		}
	}
	if !strings.Contains(out, "did not answer") {
		t.Errorf("the launcher printed no culprit report:\n%s", lastLines(out, 30))
	}
	t.Logf("launcher output:\n%s", lastLines(out, 12))
}

// TestFaultP2PTimeout: a Send/Recv timeout gets a culprit report like a
// collective's, naming where the peer is. Both ranks wait in a Recv from
// the other; whichever times out first fails the communicator, so the
// other may end aborted by that failure before its own timeout fires
// (a loaded machine starts one rank's Recv late): every rank that timed
// out must carry and log the report, and at least one must time out.
func TestFaultP2PTimeout(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	out, surv, _ := faultJob(t, 2, "p2pstuck", "HCOMM_TEST_TIMEOUT=2s")
	timedOut := 0
	for r := range 2 {
		s, ok := surv[r]
		if !ok {
			t.Fatalf("rank %d did not report:\n%s", r, lastLines(out, 30))
		}
		peer := 1 - r
		switch s["kind"] {
		case "timeout":
			timedOut++
			if want := fmt.Sprintf("rank %d (the peer) waits in Recv(float32, 4, tag 7) from rank %d", peer, r); !strings.Contains(s["err"], want) {
				t.Errorf("rank %d's error has no culprit report saying where rank %d is: %s", r, peer, s["err"])
			}
			if want := fmt.Sprintf(`op="Recv(float32, 4, tag 7) #1 with rank %d" report="rank %d (the peer)`, peer, peer); !strings.Contains(out, want) {
				t.Errorf("rank %d logged no culprit report:\n%s", r, lastLines(out, 30))
			}
		case "aborted", "peerlost":
			if want := fmt.Sprintf("rank %d failed: hcomm: Recv on rank %d (peer %d): timed out", peer, peer, r); !strings.Contains(s["err"], want) {
				t.Errorf("rank %d ended with %s, but not by rank %d's timeout: %s", r, s["kind"], peer, s["err"])
			}
		default:
			t.Errorf("rank %d ended with %s: %s", r, s["kind"], s["err"])
		}
	}
	if timedOut == 0 {
		t.Errorf("no rank timed out:\n%s", lastLines(out, 30))
	}
}

func TestFaultMismatch(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, tt := range []struct{ kind, want string }{
		{"count", "1025"}, {"op", "max"}, {"skip", "Barrier"},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			out, surv, err := faultJob(t, 3, "mismatch", "HCOMM_TEST_MISMATCH="+tt.kind, "HCOMM_TEST_TIMEOUT=30s")
			if err != nil {
				t.Fatalf("%v\n%s", err, lastLines(out, 30))
			}
			seen := false
			for r := 0; r < 3; r++ {
				s := surv[r]
				switch s["kind"] {
				case "mismatch":
					seen = true
					if !strings.Contains(s["err"], tt.want) {
						t.Errorf("rank %d's mismatch error does not show %q: %s", r, tt.want, s["err"])
					}
				case "aborted", "peerlost":
				default:
					t.Errorf("rank %d ended with %q: %s", r, s["kind"], s["err"])
				}
				if ms, _ := strconv.Atoi(s["ms"]); ms > 5000 {
					t.Errorf("rank %d took %d ms to notice", r, ms)
				}
			}
			if !seen {
				t.Errorf("no rank reported ErrMismatch:\n%s", lastLines(out, 30))
			}
		})
	}
}

// Mismatches no data message reveals (a Broadcast from the odd rank
// against an AllReduce, a Reduce to another root) are found by the stall
// check: every rank fails with ErrMismatch within seconds, over shared
// memory and TCP, whatever the rank count (issue 11 item 10).
func TestFaultMismatchStall(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, transport := range []string{"shm", "tcp"} {
		for _, n := range []int{2, 3, 5} {
			for _, kind := range []string{"bcast", "root"} {
				if testing.Short() && n != 3 {
					continue
				}
				t.Run(fmt.Sprintf("%s/n=%d/%s", transport, n, kind), func(t *testing.T) {
					out, surv, _ := faultJob(t, n, "mismatch", "HCOMM_TEST_MISMATCH="+kind,
						"HCOMM_TEST_TIMEOUT=60s", "HCOMM_TRANSPORT="+transport)
					for r := range n {
						s, ok := surv[r]
						if !ok {
							t.Errorf("rank %d did not report:\n%s", r, lastLines(out, 30))
							continue
						}
						if s["kind"] != "mismatch" {
							t.Errorf("rank %d ended with %q, want mismatch: %s", r, s["kind"], s["err"])
						}
						if ms, _ := strconv.Atoi(s["ms"]); ms > 10000 {
							t.Errorf("rank %d took %d ms to notice", r, ms)
						}
					}
				})
			}
		}
	}
}

func TestFaultHostilePeer(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	out, _, err := faultJob(t, 2, "hostile", "HCOMM_TRANSPORT=tcp")
	if err != nil {
		t.Fatalf("%v\n%s", err, lastLines(out, 40))
	}
}

// TestStoreVanishes: the store server goes away during the rendezvous;
// Init fails promptly with a clear error instead of waiting for its
// connect timeout.
func TestStoreVanishes(t *testing.T) {
	srv, err := store.NewServer(store.ServerConfig{Token: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	url := "tcp://" + srv.Addr().String()
	time.AfterFunc(200*time.Millisecond, func() { srv.Close() })
	start := time.Now()
	_, err = Init(context.Background(), &Config{Rank: 0, Size: 2, Store: url, Token: "t"})
	if err == nil {
		t.Fatal("Init succeeded without its peer")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Init failed after %v, want promptly after the store went away", d)
	}
	if !strings.Contains(err.Error(), "store") {
		t.Errorf("error does not mention the store: %v", err)
	}
	t.Logf("Init: %v", err)
}

// taggedLines parses the lines of a job's output that carry tag (e.g.
// "NOTICE ") followed by up to n space-separated key=value fields, the
// last of which may hold spaces, into each rank's fields.
func taggedLines(out, tag string, n int) map[int]map[string]string {
	lines := map[int]map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		_, rest, ok := strings.Cut(line, tag)
		if !ok {
			continue
		}
		f := map[string]string{}
		for _, kv := range strings.SplitN(rest, " ", n) {
			k, v, _ := strings.Cut(kv, "=")
			f[k] = v
		}
		r, _ := strconv.Atoi(f["rank"])
		lines[r] = f
	}
	return lines
}

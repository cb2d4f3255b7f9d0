package tcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// Environment of a helper process: the test binary run again with
// -test.run=^TestHelperProcess$, hosting one rank whose listener is
// inherited as file descriptor 3.
const (
	envScenario = "HCOMM_TCP_TEST_SCENARIO"
	envRank     = "HCOMM_TCP_TEST_RANK"
	envAddrs    = "HCOMM_TCP_TEST_ADDRS"
	envNSocks   = "HCOMM_TCP_TEST_NSOCKS"
	envToken    = "HCOMM_TCP_TEST_TOKEN"
)

var testToken = [32]byte{'h', 'c', 'o', 'm', 'm', '-', 't', 'e', 's', 't'}

const testCommID = 0x5eed

// fpFor returns the fingerprint of the seq-th message of a test.
func fpFor(seq int, count int) wire.Fingerprint {
	return wire.Fingerprint{Seq: uint64(seq), Coll: sched.AllGather, Count: int64(count)}
}

// fill writes a pattern that depends on the sender and the message.
func fill(p []byte, sender, seq int) {
	x := uint32(sender*7919 + seq*104729 + 1)
	for i := range p {
		x = x*1664525 + 1013904223
		p[i] = byte(x >> 24)
	}
}

// check verifies p holds fill's pattern.
func check(p []byte, sender, seq int) error {
	want := make([]byte, len(p))
	fill(want, sender, seq)
	if i := firstDiff(p, want); i >= 0 {
		return fmt.Errorf("message %d from rank %d: byte %d of %d is %#x, want %#x", seq, sender, i, len(p), p[i], want[i])
	}
	return nil
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return len(a)
}

// world describes the ranks of a test: listeners bound by the parent, some
// ranks hosted in this process and the others in helper processes.
type world struct {
	t      testing.TB
	size   int
	nsocks int
	lns    []net.Listener
	addrs  []string
	procs  map[int]*helperProc
	logs   *syncBuffer
}

type helperProc struct {
	cmd  *exec.Cmd
	out  syncBuffer
	in   io.WriteCloser // the helper's standard input: tell (a line), release (EOF)
	done chan struct{}
	err  error
}

// tell writes a line to the helper's standard input; a scenario waiting
// for the test's go-ahead (awaitTest) reads it.
func (p *helperProc) tell(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(p.in, "go\n"); err != nil {
		t.Fatal(err)
	}
}

// release closes the helper's standard input: a scenario waiting for the
// test to be done with it (awaitRelease) goes on.
func (p *helperProc) release() { p.in.Close() }

// stdin is the helper process's end of its standard input.
var stdin = bufio.NewReader(os.Stdin)

// awaitTest waits for the test's go-ahead (tell); an error if the test
// released the helper or went away first.
func awaitTest() error {
	if _, err := stdin.ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for the test's go-ahead: %w", err)
	}
	return nil
}

// awaitRelease waits until the test releases the helper (or exits).
func awaitRelease() { io.Copy(io.Discard, stdin) }

func newWorld(t testing.TB, size, nsocks int) *world {
	t.Helper()
	w := &world{t: t, size: size, nsocks: nsocks, procs: map[int]*helperProc{}, logs: new(syncBuffer)}
	for r := 0; r < size; r++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		w.lns = append(w.lns, ln)
		w.addrs = append(w.addrs, ln.Addr().String())
	}
	t.Cleanup(func() {
		for _, ln := range w.lns {
			if ln != nil {
				ln.Close()
			}
		}
		for _, p := range w.procs {
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return w
}

// transport returns an in-process transport for rank r.
func (w *world) transport(r int) *Transport {
	w.t.Helper()
	tr, err := New(Config{
		Rank: r, Size: w.size, Token: testToken, CommID: testCommID,
		Listener: w.lns[r], Addrs: w.addrs, NSocks: w.nsocks,
		ConnectTimeout: 10 * time.Second,
		Logger:         slog.New(slog.NewTextHandler(w.logs, nil)),
	})
	if err != nil {
		w.t.Fatal(err)
	}
	w.lns[r] = nil
	w.t.Cleanup(func() { tr.Close() })
	return tr
}

// spawn starts rank r in a helper process running scenario.
func (w *world) spawn(r int, scenario string, extraEnv ...string) *helperProc {
	w.t.Helper()
	f, err := w.lns[r].(*net.TCPListener).File()
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	w.lns[r].Close()
	w.lns[r] = nil
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v=false")
	cmd.Env = append(os.Environ(),
		envScenario+"="+scenario,
		envRank+"="+strconv.Itoa(r),
		envAddrs+"="+strings.Join(w.addrs, ","),
		envNSocks+"="+strconv.Itoa(w.nsocks),
		envToken+"="+hex.EncodeToString(testToken[:]),
	)
	cmd.Env = append(cmd.Env, extraEnv...)
	cmd.ExtraFiles = []*os.File{f}
	p := &helperProc{cmd: cmd, done: make(chan struct{})}
	if p.in, err = cmd.StdinPipe(); err != nil {
		w.t.Fatal(err)
	}
	cmd.Stdout = &p.out
	cmd.Stderr = &p.out
	if err := cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	w.procs[r] = p
	return p
}

// wait waits for rank r's helper to exit and fails the test unless it
// exited cleanly.
func (w *world) wait(r int, timeout time.Duration) {
	w.t.Helper()
	p := w.procs[r]
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.cmd.Process.Kill()
		<-p.done
		w.t.Fatalf("rank %d did not finish within %v; output:\n%s", r, timeout, p.out.String())
	}
	if p.err != nil {
		w.t.Fatalf("rank %d: %v; output:\n%s", r, p.err, p.out.String())
	}
}

// outputs returns what the helpers wrote so far, a section per rank.
func (w *world) outputs() string {
	var b strings.Builder
	for r := range w.size {
		if p := w.procs[r]; p != nil {
			fmt.Fprintf(&b, "rank %d:\n%s", r, p.out.String())
		}
	}
	return b.String()
}

// TestHelperProcess is the body of helper processes; it does nothing in a
// normal test run.
func TestHelperProcess(t *testing.T) {
	scenario := os.Getenv(envScenario)
	if scenario == "" {
		t.Skip("helper process only")
	}
	err := runHelper(scenario)
	if err != nil {
		fmt.Fprintf(os.Stderr, "helper rank %s (%s): %v\n", os.Getenv(envRank), scenario, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runHelper(scenario string) error {
	rank, _ := strconv.Atoi(os.Getenv(envRank))
	nsocks, _ := strconv.Atoi(os.Getenv(envNSocks))
	addrs := strings.Split(os.Getenv(envAddrs), ",")
	var token [32]byte
	if b, err := hex.DecodeString(os.Getenv(envToken)); err != nil || len(b) != len(token) {
		return fmt.Errorf("bad token %q", os.Getenv(envToken))
	} else {
		copy(token[:], b)
	}
	ln, err := net.FileListener(os.NewFile(3, "listener"))
	if err != nil {
		return err
	}
	tr, err := New(Config{
		Rank: rank, Size: len(addrs), Token: token, CommID: testCommID,
		Listener: ln, Addrs: addrs, NSocks: nsocks, ConnectTimeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		return err
	}
	defer tr.Close()
	// No helper outlives a stuck test by long.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f, ok := helperScenarios[scenario]
	if !ok {
		return fmt.Errorf("unknown scenario %q", scenario)
	}
	return f(ctx, tr)
}

// helperScenarios are the roles a helper process can play.
var helperScenarios = map[string]func(context.Context, *Transport) error{
	"exchange": exchange,
	"mismatch": mismatchSender,
	"abort":    abortAfterConnect,
	"stream":   streamForever,
	"stall":    stallAfterConnect,
	"echo":     echo,
	"flooded":  flooded,
}

// awaitCall returns once tr has a call in progress with peer (a Send if
// send, else a Recv) past the connection set-up: the call has entered its
// direction's gate and is reading or writing, so that a test acting then
// acts on a pending call whatever the machine's load.
func awaitCall(t testing.TB, tr *Transport, peer int, send bool) {
	t.Helper()
	g := &tr.peers[peer].recv
	if send {
		g = &tr.peers[peer].send
	}
	deadline := time.Now().Add(time.Minute)
	for {
		g.mu.Lock()
		active := g.active != nil
		g.mu.Unlock()
		if active {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call in progress with rank %d (send=%v)", peer, send)
		}
		time.Sleep(time.Millisecond) // polls a condition; acts only once it holds
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var _ io.Writer = (*syncBuffer)(nil)

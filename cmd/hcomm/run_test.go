//go:build linux

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// launcherEnv makes the test binary act as `hcomm run` (see TestMain).
const launcherEnv = "HCOMM_TEST_AS_LAUNCHER"

// helperBin is the rank program of testdata/rankhelper, built by TestMain.
var helperBin string

func TestMain(m *testing.M) {
	if os.Getenv(launcherEnv) == "1" {
		os.Exit(runCmd(os.Args[1:], os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "hcomm-run-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	helperBin = filepath.Join(dir, "rankhelper")
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	if out, err := exec.Command(goTool, "build", "-o", helperBin, "./testdata/rankhelper").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the rank helper: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// launch runs hcomm run in this process and returns its exit status and
// output.
func launch(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runJob(args, &out, &errOut, nil)
	return code, out.String(), errOut.String()
}

// helperArgs returns the arguments of hcomm run that start n ranks of the
// rank helper with the given actions, after the launcher flags.
// A zero n leaves -n out.
func helperArgs(n int, flags []string, actions ...string) []string {
	var args []string
	if n > 0 {
		args = []string{"-n", strconv.Itoa(n)}
	}
	args = append(args, flags...)
	args = append(args, "--", helperBin)
	return append(args, actions...)
}

var (
	pidRE        = regexp.MustCompile(`(?m)^(?:\[(\d+)\] )?pid=(\d+)$`)
	grandchildRE = regexp.MustCompile(`(?m)^(?:\[\d+\] )?grandchild=(\d+)$`)
)

// pids returns the pids the helper printed (pid= and grandchild=), and the
// rank pids by rank when the output is tagged.
func pids(t *testing.T, out string) (all []int, byRank map[int]int) {
	t.Helper()
	byRank = make(map[int]int)
	for _, m := range pidRE.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[2])
		all = append(all, pid)
		if m[1] != "" {
			r, _ := strconv.Atoi(m[1])
			byRank[r] = pid
		}
	}
	for _, m := range grandchildRE.FindAllStringSubmatch(out, -1) {
		pid, _ := strconv.Atoi(m[1])
		all = append(all, pid)
	}
	return all, byRank
}

// alive reports whether pid is a running process (zombies count as gone).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
		return false
	}
	return true
}

// assertGone fails the test unless every pid has ended within a few
// seconds, and kills the survivors.
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for _, pid := range pids {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("process %d still running", pid)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func TestRunEnvironment(t *testing.T) {
	code, stdout, stderr := launch(t, helperArgs(4, nil, "env", "store")...)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	if stderr != "" {
		t.Errorf("unexpected stderr:\n%s", stderr)
	}
	re := regexp.MustCompile(`(?m)^rank=(\d+) size=4 local_rank=(\d+) local_size=4 tokenlen=64 store=(tcp://127\.0\.0\.1:\d+) hostname=$`)
	ms := re.FindAllStringSubmatch(stdout, -1)
	if len(ms) != 4 {
		t.Fatalf("want 4 env lines, got %d in:\n%s", len(ms), stdout)
	}
	seen := make(map[string]bool)
	for _, m := range ms {
		if m[1] != m[2] {
			t.Errorf("rank %s has local rank %s", m[1], m[2])
		}
		if m[3] != ms[0][3] {
			t.Errorf("ranks were told different stores: %s and %s", m[3], ms[0][3])
		}
		seen[m[1]] = true
	}
	for r := range 4 {
		if !seen[strconv.Itoa(r)] {
			t.Errorf("no rank %d among %v", r, seen)
		}
	}
	if n := strings.Count(stdout, "store-ok\n"); n != 4 {
		t.Errorf("%d ranks met in the store, want 4", n)
	}
}

// TestRunGOMAXPROCS checks that local ranks share the CPUs unless the
// user sets GOMAXPROCS.
func TestRunGOMAXPROCS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks int
		env   string // GOMAXPROCS in the launcher's environment
		extra []string
		want  int
	}{
		{"shared", 2, "", nil, rankProcs(runtime.NumCPU(), 2)},
		{"oversubscribed", 3 * runtime.NumCPU(), "", nil, 1},
		{"from the environment", 2, "5", nil, 5},
		{"with -x", 2, "", []string{"-x", "GOMAXPROCS=3"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMAXPROCS", tc.env)
			code, stdout, stderr := launch(t, helperArgs(tc.ranks, tc.extra, "procs")...)
			if code != 0 {
				t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
			}
			want := fmt.Sprintf("gomaxprocs=%d\n", tc.want)
			if n := strings.Count(stdout, want); n != tc.ranks {
				t.Errorf("%d of %d ranks printed %q; output:\n%s", n, tc.ranks, want, stdout)
			}
		})
	}
	if got := rankProcs(64, 8); got != 8 {
		t.Errorf("rankProcs(64, 8) = %d, want 8", got)
	}
}

func TestRunOutput(t *testing.T) {
	const lines = 300
	code, stdout, stderr := launch(t, helperArgs(3, []string{"--tag-output"},
		"print=hello", "stderr=oops", "lines="+strconv.Itoa(lines), "partial=tail")...)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	// Per rank, the lines in order, each intact.
	got := make(map[int][]string)
	for _, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var r int
		if _, err := fmt.Sscanf(l, "[%d] ", &r); err != nil {
			t.Fatalf("untagged line %q", l)
		}
		got[r] = append(got[r], strings.TrimPrefix(l, fmt.Sprintf("[%d] ", r)))
	}
	for r := range 3 {
		want := []string{"hello"}
		for i := range lines {
			l := fmt.Sprintf("rank %d line %d ", r, i)
			want = append(want, l+strings.Repeat("x", 200-len(l)))
		}
		want = append(want, "tail")
		if !slices.Equal(got[r], want) {
			t.Errorf("rank %d: got %d lines, want %d; first: %q", r, len(got[r]), len(want), got[r][:min(3, len(got[r]))])
		}
	}
	errLines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	sort.Strings(errLines)
	if want := []string{"[0] oops", "[1] oops", "[2] oops"}; !slices.Equal(errLines, want) {
		t.Errorf("stderr lines %q, want %q", errLines, want)
	}

	// Untagged output passes through byte for byte.
	code, stdout, _ = launch(t, helperArgs(2, nil, "partial=abc")...)
	if code != 0 || stdout != "abcabc" {
		t.Errorf("untagged: status %d, stdout %q; want 0, \"abcabc\"", code, stdout)
	}
}

func TestRunRankFails(t *testing.T) {
	for _, tc := range []struct {
		name    string
		actions []string
		code    int
		line    string // the failure line, pid replaced by P
	}{
		{"exit", []string{"rank2:exit=3"}, 3, "rank 2 (pid P on HOST) exited with status 3"},
		{"sigkill", []string{"rank1:signal=SIGKILL"}, 128 + 9, "rank 1 (pid P on HOST) killed by signal SIGKILL"},
		{"sigterm", []string{"rank0:signal=SIGTERM"}, 128 + 15, "rank 0 (pid P on HOST) killed by signal SIGTERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Every rank has printed its pids when the store barrier
			// lets the failing rank go on.
			actions := append([]string{"pid", "grandchild", "store"}, tc.actions...)
			actions = append(actions, "sleep=30s")
			start := time.Now()
			code, stdout, stderr := launch(t, helperArgs(4, []string{"--tag-output", "--report-window", "0"}, actions...)...)
			elapsed := time.Since(start)
			all, byRank := pids(t, stdout)
			if len(all) != 8 {
				t.Errorf("want 8 pids, got %d in:\n%s", len(all), stdout)
			}
			assertGone(t, all)
			if code != tc.code {
				t.Errorf("exit status %d, want %d", code, tc.code)
			}
			if elapsed > 10*time.Second {
				t.Errorf("job took %v to stop", elapsed)
			}
			var failures []string
			for _, l := range strings.Split(stderr, "\n") {
				if strings.HasPrefix(l, "hcomm run: rank ") {
					failures = append(failures, l)
				}
			}
			if len(failures) != 1 {
				t.Fatalf("want one failure line, got:\n%s", stderr)
			}
			var rank, pid int
			var host string
			if _, err := fmt.Sscanf(failures[0], "hcomm run: rank %d (pid %d on %s", &rank, &pid, &host); err != nil {
				t.Fatalf("failure line %q: %v", failures[0], err)
			}
			host = strings.TrimSuffix(host, ")")
			want := "hcomm run: " + strings.NewReplacer("P", strconv.Itoa(pid), "HOST", host).Replace(tc.line)
			if failures[0] != want {
				t.Errorf("failure line %q, want %q", failures[0], want)
			}
			if byRank[rank] != pid {
				t.Errorf("failure line names pid %d, rank %d printed pid %d", pid, rank, byRank[rank])
			}
		})
	}
}

func TestRunGraceThenKill(t *testing.T) {
	start := time.Now()
	code, stdout, stderr := launch(t, helperArgs(3, []string{"--grace", "300ms", "--report-window", "0"},
		"pid", "ignore-term", "store", "rank0:exit=1", "sleep=30s")...)
	all, _ := pids(t, stdout)
	assertGone(t, all)
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
	if !strings.Contains(stderr, "2 rank(s) still running 300ms after being told to stop; sending SIGKILL") {
		t.Errorf("no SIGKILL message in:\n%s", stderr)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("job took %v", d)
	}
}

func TestRunTimeout(t *testing.T) {
	code, stdout, stderr := launch(t, helperArgs(2, []string{"--timeout", "1s"}, "pid", "grandchild", "sleep=30s")...)
	all, _ := pids(t, stdout)
	if len(all) != 4 {
		t.Errorf("want 4 pids, got %d in:\n%s", len(all), stdout)
	}
	assertGone(t, all)
	if code != exitTimeout {
		t.Errorf("exit status %d, want %d", code, exitTimeout)
	}
	if !strings.Contains(stderr, "hcomm run: job timed out after 1s; stopping 2 rank(s)") {
		t.Errorf("no timeout message in:\n%s", stderr)
	}
}

// startLauncher runs the test binary as `hcomm run` with args and returns
// it once its ranks have printed want pid lines, with the pids.
func startLauncher(t *testing.T, want int, args ...string) (*exec.Cmd, *syncBuffer, []int) {
	t.Helper()
	var seen []int
	cmd, stderr := startLauncherUntil(t, func(l string) bool {
		if all, _ := pids(t, l); len(all) == 1 {
			seen = append(seen, all[0])
		}
		return len(seen) == want
	}, args...)
	return cmd, stderr, seen
}

// startLauncherUntil runs the test binary as `hcomm run` with args and
// returns it once done has returned true for a line of its standard
// output; done sees every line until then.
func startLauncherUntil(t *testing.T, done func(line string) bool, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), launcherEnv+"=1")
	stderr := new(syncBuffer)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(20 * time.Second)
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				cmd.Wait()
				t.Fatalf("launcher output ended early; stderr:\n%s", stderr)
			}
			ready = done(l)
		case <-timeout:
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("ranks did not get ready; stderr:\n%s", stderr)
		}
	}
	go func() {
		for range lines {
		}
	}()
	return cmd, stderr
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestRunForwardsSignals(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(signalName(sig), func(t *testing.T) {
			cmd, stderr, all := startLauncher(t, 6, helperArgs(3, nil, "pid", "grandchild", "sleep=30s")...)
			cmd.Process.Signal(sig)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatal("launcher did not stop")
			}
			if code := cmd.ProcessState.ExitCode(); code != 128+int(sig) {
				t.Errorf("exit status %d, want %d", code, 128+int(sig))
			}
			if want := "hcomm run: received " + signalName(sig) + "; passing it on to 3 rank(s)"; !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr lacks %q:\n%s", want, stderr)
			}
			assertGone(t, all)
		})
	}
}

func TestRunLauncherKilled(t *testing.T) {
	cmd, _, all := startLauncher(t, 2, helperArgs(2, nil, "pid", "sleep=30s")...)
	cmd.Process.Kill()
	cmd.Wait()
	assertGone(t, all) // the parent-death signal
}

// fakeRsh writes an rsh command that runs the command line it is given
// here, as ssh would on the host, logs the host names to log, and its
// whole command line, one argument a line, to argvLog.
func fakeRsh(t *testing.T) (rsh, log, argvLog string) {
	dir := t.TempDir()
	rsh = filepath.Join(dir, "fake-rsh")
	log = filepath.Join(dir, "hosts.log")
	argvLog = filepath.Join(dir, "argv.log")
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$0\" \"$@\" >> %s\nhost=$1; shift\nprintf '%%s\\n' \"$host\" >> %s\nexec sh -c \"$*\"\n",
		shellQuote(argvLog), shellQuote(log))
	if err := os.WriteFile(rsh, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return rsh, log, argvLog
}

func TestRunRemote(t *testing.T) {
	rsh, log, argvLog := fakeRsh(t)
	t.Setenv("HCOMM_TEST_FORWARDED", "yes")
	const text = `it's a "test" with $HOME, * and  two spaces`
	code, stdout, stderr := launch(t, helperArgs(0,
		[]string{"--hosts", "a:2,b:2", "--rsh", rsh, "--store-addr", "127.0.0.1:0", "--tag-output", "-x", "EXTRA=1 2"},
		"env", "print="+text, "getenv=HCOMM_TEST_FORWARDED", "getenv=EXTRA", "token", "store")...)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	for r, host := range []string{"a", "a", "b", "b"} {
		for _, want := range []string{
			fmt.Sprintf("[%d] rank=%d size=4 local_rank=%d local_size=2 tokenlen=64 store=tcp://127.0.0.1:", r, r, r%2),
			fmt.Sprintf(" hostname=%s\n", host),
			fmt.Sprintf("[%d] %s\n", r, text),
			fmt.Sprintf("[%d] HCOMM_TEST_FORWARDED=yes\n", r),
			fmt.Sprintf("[%d] EXTRA=1 2\n", r),
			fmt.Sprintf("[%d] store-ok\n", r),
		} {
			if !strings.Contains(stdout, want) {
				t.Errorf("rank %d: output lacks %q", r, want)
			}
		}
	}
	logged, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	hosts := strings.Fields(string(logged))
	sort.Strings(hosts)
	if !slices.Equal(hosts, []string{"a", "a", "b", "b"}) {
		t.Errorf("rsh ran on %q, want a, a, b, b", hosts)
	}

	// The token reached every rank, but not the rsh command lines, which
	// every user can read (ps).
	tokens := regexp.MustCompile(`(?m)^\[\d\] token=(.*)$`).FindAllStringSubmatch(stdout, -1)
	if len(tokens) != 4 || len(tokens[0][1]) != 2*tokenBytes {
		t.Fatalf("ranks printed tokens %q", tokens)
	}
	argv, err := os.ReadFile(argvLog)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(argv), rsh+"\n"); n != 4 {
		t.Errorf("argv log holds %d rsh command lines, want 4:\n%s", n, argv)
	}
	if strings.Contains(string(argv), tokens[0][1]) || strings.Contains(string(argv), "HCOMM_TOKEN=") {
		t.Errorf("the token is on an rsh command line:\n%s", argv)
	}

	// A remote rank's failure names its host.
	code, _, stderr = launch(t, "--hosts", "a,b", "--rsh", rsh, "--store-addr", "127.0.0.1:0", "--report-window", "0", "--", helperBin, "rank1:exit=5", "sleep=30s")
	if code != 5 || !regexp.MustCompile(`hcomm run: rank 1 \(pid \d+ on b\) exited with status 5`).MatchString(stderr) {
		t.Errorf("status %d, stderr:\n%s", code, stderr)
	}
}

func TestRunReports(t *testing.T) {
	code, _, stderr := launch(t, helperArgs(3, nil,
		`rank1:report=peer 2 is gone\nsecond line`, "store", "rank2:exit=6", "sleep=30s")...)
	if code != 6 {
		t.Errorf("exit status %d, want 6", code)
	}
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "hcomm run: rank") {
			lines = append(lines, regexp.MustCompile(`\(pid \d+ on [^)]*\)`).ReplaceAllString(l, "(pid P)"))
		}
	}
	want := []string{
		"hcomm run: rank 2 (pid P) exited with status 6",
		"hcomm run: rank 1: peer 2 is gone",
		"hcomm run: rank 1: second line",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("got lines\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

func TestRunStartFailure(t *testing.T) {
	code, _, stderr := launch(t, "-n", "2", "--", filepath.Join(t.TempDir(), "no-such-program"))
	if code != exitLaunchFailed || !strings.Contains(stderr, "hcomm run: cannot start rank 0 on ") {
		t.Errorf("status %d, stderr:\n%s", code, stderr)
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "2"}, "no program to run"},
		{[]string{"true"}, "-n is required"},
		{[]string{"-n", "-1", "true"}, "-n -1"},
		{[]string{"--hosts", "a", "--host-file", "f", "true"}, "exclude each other"},
		{[]string{"--hosts", "a:x", "true"}, `slots "x"`},
		{[]string{"--hosts", "-oProxyCommand=x", "true"}, "must not start with '-'"},
		{[]string{"-n", "5", "--hosts", "a:2,b:2", "true"}, "only 4 slots"},
		{[]string{"--host-file", "/nonexistent/hosts", "true"}, "--host-file /nonexistent/hosts"},
		{[]string{"-n", "1", "-x", "1BAD=2", "true"}, "bad variable name"},
		{[]string{"-n", "1", "--rsh", " ", "true"}, "--rsh is empty"},
		{[]string{"-n", "1", "--timeout", "-1s", "true"}, "must not be negative"},
		{[]string{"-n", "1", "--store-addr", "nonsense", "true"}, "--store-addr"},
	} {
		code, _, stderr := launch(t, tc.args...)
		wantCode := exitUsage
		if strings.Contains(tc.want, "--store-addr") {
			wantCode = exitLaunchFailed
		}
		if code != wantCode || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: status %d, stderr %q; want %d and %q", tc.args, code, stderr, wantCode, tc.want)
		}
	}
	if code, _, _ := launch(t, "-h"); code != 0 {
		t.Errorf("-h: status %d, want 0", code)
	}
}

func TestDescribeExit(t *testing.T) {
	for _, tc := range []struct {
		ws     syscall.WaitStatus
		desc   string
		status int
		failed bool
	}{
		{0, "exited with status 0", 0, false},
		{3 << 8, "exited with status 3", 3, true},
		{255 << 8, "exited with status 255", 255, true},
		{syscall.WaitStatus(syscall.SIGKILL), "killed by signal SIGKILL", 137, true},
		{syscall.WaitStatus(syscall.SIGSEGV) | 0x80, "killed by signal SIGSEGV (core dumped)", 139, true},
		{syscall.WaitStatus(40), "killed by signal 40", 168, true},
	} {
		desc, status, failed := describeExit(tc.ws)
		if desc != tc.desc || status != tc.status || failed != tc.failed {
			t.Errorf("describeExit(%#x) = %q, %d, %v; want %q, %d, %v", uint32(tc.ws), desc, status, failed, tc.desc, tc.status, tc.failed)
		}
	}
}

func TestRunFailureBeatsTimeout(t *testing.T) {
	// The timeout expires while the job stops for a failure: the failure
	// stays the reason.
	code, _, stderr := launch(t, helperArgs(2, []string{"--timeout", "400ms", "--grace", "2s"},
		"ignore-term", "store", "rank0:exit=4", "sleep=1s")...)
	if code != 4 || strings.Contains(stderr, "timed out") {
		t.Errorf("status %d, stderr:\n%s", code, stderr)
	}
}

func TestNewJobRemoteSettings(t *testing.T) {
	t.Setenv("HCOMM_DEBUG", "INFO")
	t.Setenv("HCOMM_RANK", "9")
	t.Setenv("HCOMM_HOSTNAME", "elsewhere")
	j := newJob(&runConfig{prog: "./bin/prog", env: []string{"A=1"}}, nil, io.Discard, io.Discard)
	if !filepath.IsAbs(j.remoteProg) || !strings.HasSuffix(j.remoteProg, "/bin/prog") {
		t.Errorf("remote program %q, want an absolute path", j.remoteProg)
	}
	if !slices.Contains(j.remoteEnv, "HCOMM_DEBUG=INFO") || !slices.Contains(j.remoteEnv, "A=1") {
		t.Errorf("remote environment %q lacks HCOMM_DEBUG or -x A", j.remoteEnv)
	}
	for _, kv := range j.remoteEnv {
		if strings.HasPrefix(kv, "HCOMM_RANK=") || strings.HasPrefix(kv, "HCOMM_HOSTNAME=") {
			t.Errorf("remote environment passes on the launcher's %s", kv)
		}
	}
	if j := newJob(&runConfig{prog: "prog"}, nil, io.Discard, io.Discard); j.remoteProg != "prog" {
		t.Errorf("a program on the PATH became %q", j.remoteProg)
	}
}

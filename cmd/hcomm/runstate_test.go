//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/trace"
)

// stateSection returns the lines of the launcher's state report, without
// their "hcomm run:   " prefix.
func stateSection(stderr string) []string {
	var out []string
	in := false
	for _, l := range strings.Split(stderr, "\n") {
		switch {
		case l == "hcomm run: state of the ranks before stopping them:":
			in = true
		case in && strings.HasPrefix(l, "hcomm run:   "):
			out = append(out, strings.TrimPrefix(l, "hcomm run:   "))
		default:
			in = false
		}
	}
	return out
}

var forRE = regexp.MustCompile(` for [0-9.]+m?s`)

// TestRunStatesOnSignal stops a job whose ranks 0 and 1 wait in an
// AllReduce that rank 2 never joins: the launcher reports each rank's
// state, and who waits for whom, before it passes SIGINT on.
func TestRunStatesOnSignal(t *testing.T) {
	entered, idle := 0, false
	cmd, stderr := startLauncherUntil(t, func(l string) bool {
		switch {
		case strings.HasSuffix(l, "] entered"):
			entered++
		case l == "[2] idle":
			idle = true
		}
		return entered == 2 && idle
	}, helperArgs(3, []string{"--tag-output"}, "init", "barrier", "rank0:enter", "rank1:enter", "rank2:print=idle", "sleep=30s")...)
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("launcher did not stop")
	}
	if code := cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGINT) {
		t.Errorf("exit status %d, want %d", code, 128+int(syscall.SIGINT))
	}
	got := stateSection(stderr.String())
	for i := range got {
		got[i] = forRE.ReplaceAllString(regexp.MustCompile(`\(pid \d+\)`).ReplaceAllString(got[i], "(pid P)"), " for T")
	}
	want := []string{
		"rank 0 (pid P): communicator world rank 0: op #2 AllReduce(int64, 1, sum) running for T (last completed #1)",
		"rank 1 (pid P): communicator world rank 1: op #2 AllReduce(int64, 1, sum) running for T (last completed #1)",
		"rank 2 (pid P): communicator world rank 2: op #1 Barrier(uint8, 0) done for T",
		"communicator world: ranks 0-1 wait in op #2 AllReduce(int64, 1, sum); rank 2 last completed op #1 and has not entered #2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("state report\n%s\nwant\n%s\nstderr:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), stderr)
	}
	// The report comes before the signal is passed on.
	s := stderr.String()
	if i, j := strings.Index(s, "received SIGINT"), strings.Index(s, "state of the ranks"); i < 0 || j < i {
		t.Errorf("stderr:\n%s", s)
	}
}

// TestRunStatesOnTimeout: the same report when --timeout stops the job.
func TestRunStatesOnTimeout(t *testing.T) {
	code, stdout, stderr := launch(t, helperArgs(2, []string{"--tag-output", "--timeout", "3s"},
		"pid", "init", "rank1:enter", "sleep=30s")...)
	all, byRank := pids(t, stdout)
	assertGone(t, all)
	if code != exitTimeout {
		t.Errorf("exit status %d, want %d", code, exitTimeout)
	}
	got := stateSection(stderr)
	if !strings.Contains(stdout, "[1] entered") {
		t.Fatalf("rank 1 did not enter its AllReduce within the timeout; stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	want := []string{
		fmt.Sprintf("rank 0 (pid %d): communicator world rank 0: no operation yet", byRank[0]),
		fmt.Sprintf("rank 1 (pid %d): communicator world rank 1: op #1 AllReduce(int64, 1, sum) running for T (last completed #0)", byRank[1]),
		"communicator world: rank 0 last completed op #0 and has not entered #1; rank 1 waits in op #1 AllReduce(int64, 1, sum)",
	}
	for i := range got {
		got[i] = forRE.ReplaceAllString(got[i], " for T")
	}
	if !slices.Equal(got, want) {
		t.Errorf("state report\n%s\nwant\n%s\nstderr:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), stderr)
	}
}

// TestRunSurvivorsReport: when a rank fails, the others have the report
// window to notice and say so before they are stopped; here they fail on
// their own, naming the lost rank, and nothing needs stopping.
func TestRunSurvivorsReport(t *testing.T) {
	start := time.Now()
	code, _, stderr := launch(t, helperArgs(3, []string{"--tag-output", "--report-window", "30s"},
		"init", "barrier", "rank2:exit=3", "allreduce")...)
	if code != 3 {
		t.Errorf("exit status %d, want 3", code)
	}
	for _, r := range []int{0, 1} {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^\[%d\] rankhelper %d: allreduce: .*rank 2 failed`, r, r))
		if !re.MatchString(stderr) {
			t.Errorf("rank %d did not report rank 2's failure; stderr:\n%s", r, stderr)
		}
	}
	if strings.Contains(stderr, "still running") || strings.Contains(stderr, "state of the ranks") {
		t.Errorf("the launcher had to stop the survivors:\n%s", stderr)
	}
	if d := time.Since(start); d > 25*time.Second {
		t.Errorf("took %v: the window did not end when the survivors exited", d)
	}
}

// TestRunVerbose checks the rank → host/pid map.
func TestRunVerbose(t *testing.T) {
	code, stdout, stderr := launch(t, helperArgs(2, []string{"--verbose", "--tag-output"}, "pid")...)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	_, byRank := pids(t, stdout)
	for r := range 2 {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^hcomm run: rank %d on \S+ \(local rank %d of 2\): pid %d$`, r, r, byRank[r]))
		if !re.MatchString(stderr) {
			t.Errorf("no map line for rank %d (pid %d) in:\n%s", r, byRank[r], stderr)
		}
	}
	if !strings.Contains(stderr, "hcomm run: store tcp://127.0.0.1:") {
		t.Errorf("no store line in:\n%s", stderr)
	}
}

func TestStateLines(t *testing.T) {
	snap := func(entered, completed uint64, call, state string) trace.Snapshot {
		return trace.Snapshot{Entered: entered, Completed: completed, Call: call, State: state, ForMS: 1500}
	}
	ar := "AllReduce(float32, 4, sum)"
	for _, tc := range []struct {
		name   string
		states []rankState
		want   []string
	}{
		{"all idle", []rankState{
			{true, &procState{PID: 10, Comms: []commState{{"world", 0, snap(3, 3, ar, "done")}}}},
			{true, &procState{PID: 11, Comms: []commState{{"world", 1, snap(3, 3, ar, "done")}}}},
		}, []string{
			"rank 0 (pid 10): communicator world rank 0: op #3 " + ar + " done for 1.5s",
			"rank 1 (pid 11): communicator world rank 1: op #3 " + ar + " done for 1.5s",
		}},
		{"one behind, one silent, one not joined", []rankState{
			{true, &procState{PID: 10, Comms: []commState{{"world", 0, snap(4, 3, ar, "running")}}}},
			{true, &procState{PID: 11, Comms: []commState{{"world", 1, snap(3, 3, ar, "done")}}}},
			{true, nil},
			{false, nil},
		}, []string{
			"rank 0 (pid 10): communicator world rank 0: op #4 " + ar + " running for 1.5s (last completed #3)",
			"rank 1 (pid 11): communicator world rank 1: op #3 " + ar + " done for 1.5s",
			"rank 2: did not answer (still in Init, hung, or cut off from the store)",
			"rank 3: has not joined hcomm (not started yet, or not an hcomm program)",
			"communicator world: rank 0 waits in op #4 " + ar + "; rank 1 last completed op #3 and has not entered #4; ranks 2-3 did not answer",
		}},
		{"failed op and a sub-communicator", []rankState{
			{true, &procState{PID: 10, Comms: []commState{{"world", 0, snap(2, 1, ar, "failed")}, {"sub", 0, snap(1, 0, "Barrier(uint8, 0)", "running")}}}},
			{true, &procState{PID: 11, Comms: []commState{{"world", 1, snap(2, 1, ar, "failed")}, {"sub", 1, snap(0, 0, "", "")}}}},
			{true, &procState{PID: 12}},
		}, []string{
			"rank 0 (pid 10): communicator world rank 0: op #2 " + ar + " failed for 1.5s",
			"rank 0 (pid 10): communicator sub rank 0: op #1 Barrier(uint8, 0) running for 1.5s (last completed #0)",
			"rank 1 (pid 11): communicator world rank 1: op #2 " + ar + " failed for 1.5s",
			"rank 1 (pid 11): communicator sub rank 1: no operation yet",
			"rank 2 (pid 12): no open communicator",
			"communicator world: ranks 0-1 failed op #2 " + ar + "; rank 2 closed it",
			"communicator sub: rank 0 waits in op #1 Barrier(uint8, 0); rank 1 last completed op #0 and has not entered #1",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stateLines(tc.states); !slices.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// FuzzStateLines feeds arbitrary answers to the report: no panic, and no
// allocation beyond the job's size whatever rank numbers they claim.
func FuzzStateLines(f *testing.F) {
	f.Add([]byte(`{"world":0,"pid":1,"comms":[{"comm":"world","rank":0,"entered":2,"call":"AllReduce(int64, 1, sum)","state":"running","completed":1,"for_ms":5}]}`), 2)
	f.Add([]byte(`{"comms":[{"comm":"sub","rank":1099511627776}]}`), 3)
	f.Add([]byte(`{"comms":[{"comm":"world","rank":-5,"entered":18446744073709551615}]}`), 1)
	f.Fuzz(func(t *testing.T, answer []byte, n int) {
		n = 1 + (n&0xff)%8
		var ps procState
		if json.Unmarshal(answer, &ps) != nil {
			return
		}
		states := make([]rankState, n)
		for r := range states {
			states[r] = rankState{joined: true, state: &ps}
		}
		states[0].state = nil
		stateLines(states)
	})
}

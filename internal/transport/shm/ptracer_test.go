//go:build linux

package shm

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
)

func TestPtracerFor(t *testing.T) {
	// A process tree: 1 ─ 10 (sshd) ─ 20 (launcher) ─ 30, 31, 32 (ranks)
	//                  └ 40 (another launcher) ─ 50 (rank of another job)
	parents := map[int]int{10: 1, 20: 10, 30: 20, 31: 20, 32: 20, 40: 1, 50: 40}
	parent := func(p int) (int, error) {
		if pp, ok := parents[p]; ok {
			return pp, nil
		}
		return 0, errors.New("no such process")
	}
	tests := []struct {
		name  string
		self  int
		peers []int
		want  int
	}{
		{"one peer is named itself", 30, []int{31}, 31},
		{"two peers: their launcher", 30, []int{31, 32}, 20},
		{"self among the peers is ignored", 30, []int{30, 31}, 31},
		{"only self (ranks in one process)", 30, []int{30, 30}, 0},
		{"no peers", 30, nil, 0},
		{"peers whose only common ancestor is init", 30, []int{31, 50}, 0},
		{"a peer that is gone", 30, []int{31, 99}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ptracerFor(tt.self, tt.peers, parent); got != tt.want {
				t.Errorf("ptracerFor(%d, %v) = %d, want %d", tt.self, tt.peers, got, tt.want)
			}
		})
	}
}

// TestPtracerForProcesses names the ptracer for two real child processes
// of this one: this process, their parent.
func TestPtracerForProcesses(t *testing.T) {
	var pids []int
	for range 2 {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Skip("cannot start sleep:", err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pids = append(pids, cmd.Process.Pid)
	}
	if got := ptracerFor(-1, pids, parentPid); got != os.Getpid() {
		t.Errorf("ptracer for children %v = %d, want their parent %d", pids, got, os.Getpid())
	}
	if pp, err := parentPid(os.Getpid()); err != nil || pp != os.Getppid() {
		t.Errorf("parentPid(self) = %d, %v; want %d", pp, err, os.Getppid())
	}
}

// TestNoPtracerWithoutSingleCopy checks that a transport with single-copy
// reads off never touches its ptrace permissions, and one with them on
// does when its peers are other processes.
func TestNoPtracerWithoutSingleCopy(t *testing.T) {
	var mu sync.Mutex
	var calls []int
	old := setPtracer
	setPtracer = func(pid int) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, pid)
		return nil
	}
	t.Cleanup(func() { setPtracer = old })
	named := func() []int {
		mu.Lock()
		defer mu.Unlock()
		c := calls
		calls = nil
		return c
	}
	// In one process every peer is this process: there is nobody to name.
	newLocalGroup(t, 2, "default")
	if c := named(); len(c) != 0 {
		t.Fatalf("ranks in one process named ptracers %v", c)
	}
	// This process is rank 0 of clusters of child processes.
	tests := []struct {
		size    int
		variant string
		want    func(c *cluster) []int
	}{
		{2, "nocma", func(*cluster) []int { return nil }},
		{3, "nocma", func(*cluster) []int { return nil }},
		{2, "default", func(c *cluster) []int { return []int{c.kids[1].cmd.Process.Pid} }},
		{3, "default", func(*cluster) []int { return []int{os.Getpid()} }},
	}
	for _, tt := range tests {
		c := startCluster(t, tt.size, 0, "idle", tt.variant)
		c.transport()
		if got, want := named(), tt.want(c); !slices.Equal(got, want) {
			t.Errorf("%d ranks, %s: named ptracers %v, want %v", tt.size, tt.variant, got, want)
		}
	}
}

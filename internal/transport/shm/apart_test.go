//go:build linux

package shm

import (
	"runtime"
	"testing"

	"github.com/hcomm-go/hcomm/internal/topo"
	"golang.org/x/sys/unix"
)

// TestMoveOff moves the test's thread off its CPU and checks that its
// affinity is back as it was, and that moveOff refuses where it must.
func TestMoveOff(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	n := before.Count()
	c := topo.CurrentCPU()
	if c < 0 || !before.IsSet(c) {
		t.Skipf("getcpu gave %d", c)
	}
	if moveOff(c, n+1) {
		t.Errorf("moveOff(%d, %d) moved with %d CPUs allowed", c, n+1, n)
	}
	other := -1
	for i := range 1024 {
		if !before.IsSet(i) {
			other = i
			break
		}
	}
	if other >= 0 && moveOff(other, 1) {
		t.Errorf("moveOff(%d) moved off a CPU the thread may not use", other)
	}
	if got := moveOff(c, 1); got != (n >= 2) {
		t.Errorf("moveOff(%d, 1) = %v with %d CPUs allowed", c, got, n)
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("affinity after moveOff: %d CPUs, want the %d before", after.Count(), n)
	}
}

// TestMoveApart checks when a woken rank moves: only with spread on, a
// noted CPU, and that CPU its own.
func TestMoveApart(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil || set.Count() < 2 {
		t.Skip("needs two CPUs")
	}
	tr := &Transport{local: []int{0, 1}}
	var word uint32
	noteCPU(&word)
	if word == 0 {
		t.Fatal("noteCPU noted nothing")
	}
	if tr.moveApart(&word) {
		t.Error("moved with spread off")
	}
	tr.spread = true
	if zero := uint32(0); tr.moveApart(&zero) {
		t.Error("moved with no CPU noted")
	}
	// A CPU this thread does not run on (noted, then moved off).
	c := topo.CurrentCPU()
	far := uint32(c) + 2
	if tr.moveApart(&far) {
		t.Errorf("moved off CPU %d while on %d", far-1, c)
	}
	// Its own CPU (tried again should the scheduler move the thread
	// between noting and looking).
	for range 100 {
		noteCPU(&word)
		if tr.moveApart(&word) {
			return
		}
	}
	t.Error("never moved off its own noted CPU")
}

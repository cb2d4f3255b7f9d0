//go:build linux

package shm

import (
	"runtime"
	"testing"

	"github.com/hcomm-go/hcomm/internal/topo"
	"golang.org/x/sys/unix"
)

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

//go:build linux

package shm

import (
	"runtime"
	"testing"

	"github.com/hcomm-go/hcomm/internal/topo"
	"golang.org/x/sys/unix"
)

// TestMoveOffOneThread: moveOff puts back the affinity of the thread it
// narrowed even when its goroutine waits in between and another
// goroutine takes that thread. Between the narrowing and the restore
// (testMoved), the caller starts a goroutine, which typically runs next
// on the caller's thread, and waits for it; that goroutine locks itself
// to its thread and holds it until moveOff has returned, so the caller
// goes on elsewhere unless it is locked to the thread. Each time, the
// thread moveOff narrowed must have its whole affinity back.
func TestMoveOffOneThread(t *testing.T) {
	runtime.LockOSThread()
	var before unix.CPUSet
	err := unix.SchedGetaffinity(0, &before)
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	if before.Count() < 2 {
		t.Skip("needs two CPUs")
	}
	defer func() { testMoved = nil }()
	for range 50 {
		var narrowed, other int
		hold := make(chan struct{})
		done := make(chan struct{})
		testMoved = func() {
			narrowed = unix.Gettid()
			took := make(chan int)
			go func() {
				defer close(done)
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				took <- unix.Gettid()
				<-hold
				// Should moveOff have left this thread narrowed, it
				// goes back to the pool whole for the tests after.
				unix.SchedSetaffinity(0, &before)
			}()
			other = <-took
		}
		c := topo.CurrentCPU()
		if c < 0 {
			t.Skip("no getcpu")
		}
		moved := moveOff(c, 1)
		var got unix.CPUSet
		err := unix.SchedGetaffinity(narrowed, &got)
		if moved {
			close(hold)
			<-done
		}
		switch {
		case !moved:
			t.Fatalf("moveOff(%d, 1) did not move with %d CPUs allowed", c, before.Count())
		case err != nil:
			t.Fatal(err)
		case got != before:
			t.Fatalf("moveOff left thread %d with %d CPUs allowed, not %d (its caller waited meanwhile, and thread %d ran)", narrowed, got.Count(), before.Count(), other)
		}
	}
}

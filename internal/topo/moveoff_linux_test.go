//go:build linux

package topo

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMoveOff moves the test's thread off its CPU and checks that its
// affinity is back as it was, and that MoveOff refuses where it must.
func TestMoveOff(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	n := before.Count()
	c := CurrentCPU()
	if c < 0 || !before.IsSet(c) {
		t.Skipf("getcpu gave %d", c)
	}
	if MoveOff(c, n+1) {
		t.Errorf("MoveOff(%d, %d) moved with %d CPUs allowed", c, n+1, n)
	}
	other := -1
	for i := range 1024 {
		if !before.IsSet(i) {
			other = i
			break
		}
	}
	if other >= 0 && MoveOff(other, 1) {
		t.Errorf("MoveOff(%d) moved off a CPU the thread may not use", other)
	}
	if got := MoveOff(c, 1); got != (n >= 2) {
		t.Errorf("MoveOff(%d, 1) = %v with %d CPUs allowed", c, got, n)
	}
	var after unix.CPUSet
	if err := unix.SchedGetaffinity(0, &after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("affinity after MoveOff: %d CPUs, want the %d before", after.Count(), n)
	}
}

// TestMoveOffOneThread: MoveOff puts back the affinity of the thread it
// narrowed even when its goroutine waits in between and another
// goroutine takes that thread. Between the narrowing and the restore
// (testMoved), the caller starts a goroutine, which typically runs next
// on the caller's thread, and waits for it; that goroutine locks itself
// to its thread and holds it until MoveOff has returned, so the caller
// goes on elsewhere unless it is locked to the thread. Each time, the
// thread MoveOff narrowed must have its whole affinity back.
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
				// Should MoveOff have left this thread narrowed, it
				// goes back to the pool whole for the tests after.
				unix.SchedSetaffinity(0, &before)
			}()
			other = <-took
		}
		c := CurrentCPU()
		if c < 0 {
			t.Skip("no getcpu")
		}
		moved := MoveOff(c, 1)
		var got unix.CPUSet
		err := unix.SchedGetaffinity(narrowed, &got)
		if moved {
			close(hold)
			<-done
		}
		switch {
		case !moved:
			t.Fatalf("MoveOff(%d, 1) did not move with %d CPUs allowed", c, before.Count())
		case err != nil:
			t.Fatal(err)
		case got != before:
			t.Fatalf("MoveOff left thread %d with %d CPUs allowed, not %d (its caller waited meanwhile, and thread %d ran)", narrowed, got.Count(), before.Count(), other)
		}
	}
}

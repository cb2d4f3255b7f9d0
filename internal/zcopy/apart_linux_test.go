package zcopy

import (
	"encoding/binary"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hcomm-go/hcomm/internal/topo"
)

// A round's moveApart acts when a lower rank's record names the CPU this
// rank runs on, and only then: not on a higher rank's record, another CPU
// or an unknown one. The thread is pinned to its CPU for the test, so it
// cannot move (MoveOff needs two allowed CPUs) and the answer does not
// depend on where the scheduler puts it.
func TestMoveApart(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Skip(err)
	}
	c := topo.CurrentCPU()
	if c < 0 {
		t.Skip("getcpu unavailable")
	}
	var one unix.CPUSet
	one.Set(c)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Skip(err)
	}
	defer unix.SchedSetaffinity(0, &was)
	if got := topo.CurrentCPU(); got != c {
		t.Fatalf("pinned to CPU %d, runs on %d", c, got)
	}
	for _, tc := range []struct {
		name string
		me   int
		cpus []int // each rank's record's CPU; -1 unknown
		want bool
	}{
		{"lower rank here", 1, []int{c, -1}, true},
		{"lower rank elsewhere", 1, []int{c + 1, -1}, false},
		{"lower rank unknown", 1, []int{-1, -1}, false},
		{"higher rank here", 0, []int{-1, c}, false},
		{"third rank, second lower here", 2, []int{c + 1, c, -1}, true},
	} {
		r := &Registry{all: make([]byte, len(tc.cpus)*RecSize)}
		for p, q := range tc.cpus {
			binary.LittleEndian.PutUint32(r.all[p*RecSize+12:], uint32(q+1))
			if got := recCPU(r.all[p*RecSize:]); got != q {
				t.Fatalf("recCPU = %d, want %d", got, q)
			}
		}
		r.moveApart(&Path{Rank: tc.me, Size: len(tc.cpus)})
		if got := r.Moves.Load() == 1; got != tc.want {
			t.Errorf("%s: moved %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := topo.CurrentCPU(); got != c {
		t.Errorf("the pinned thread left CPU %d for %d", c, got)
	}
}

package topo

import (
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// AllowedCPUs returns the CPUs this process may run on.
func AllowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, err
	}
	return setCPUs(&set), nil
}

// ThreadCPUs returns the CPUs the calling thread may run on.
func ThreadCPUs() ([]int, error) { return AllowedCPUs() }

func setCPUs(set *unix.CPUSet) []int {
	var cpus []int
	n := set.Count()
	for c := 0; c < len(set)*64 && len(cpus) < n; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

func cpuSet(cpus []int) unix.CPUSet {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	return set
}

// Pin locks the calling goroutine to its OS thread and lets that thread
// run only on cpus: a polling worker calls it once when it starts. The
// goroutine must not unlock the thread; when it returns, the runtime ends
// the thread with it, so no other goroutine inherits the affinity. Empty
// cpus pins nothing. On an error the goroutine is left unlocked.
func Pin(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	runtime.LockOSThread()
	set := cpuSet(cpus)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return nil
}

// WithCPUs runs f on a thread that may run only on cpus, then restores the
// thread's affinity: a process f starts (fork and exec) inherits the CPUs.
// Empty cpus runs f as it is.
func WithCPUs(cpus []int, f func() error) error {
	if len(cpus) == 0 {
		return f()
	}
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	set := cpuSet(cpus)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		runtime.UnlockOSThread()
		return err
	}
	err := f()
	if unix.SchedSetaffinity(0, &old) == nil {
		runtime.UnlockOSThread()
	}
	// A thread that could not be restored stays locked to this
	// goroutine's end and is not reused.
	return err
}

// BindProcess lets every thread of this process run only on cpus, as
// if the process had been started bound to them: the rank binds itself
// where its launcher could not (a rank started over ssh). Threads the
// process starts later inherit the mask of the thread that starts them,
// so the threads are bound until a pass over /proc/self/task finds none
// it has not bound. Empty cpus does nothing.
func BindProcess(cpus []int) error {
	if len(cpus) == 0 {
		return nil
	}
	set := cpuSet(cpus)
	bound := map[int]bool{}
	for {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		fresh := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || bound[tid] {
				continue
			}
			// A thread that ended meanwhile (ESRCH) needs no binding.
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return err
			}
			bound[tid] = true
			fresh++
		}
		if fresh == 0 {
			return nil
		}
	}
}

// CurrentCPU returns the CPU the calling thread runs on, or -1 (getcpu).
func CurrentCPU() int {
	var c uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c)), 0, 0); e != 0 {
		return -1
	}
	return int(c)
}

// testMoved, set by tests before use, is called by MoveOff between the
// narrowing of the thread's affinity and its restore.
var testMoved func()

// MoveOff moves the calling thread off CPU c when its affinity allows c
// and at least n (and 2) CPUs, and puts its affinity back as it was:
// nothing stays bound, the kernel just places the thread elsewhere once.
// It reports whether it moved the thread.
func MoveOff(c, n int) bool {
	// Narrowed and put back on one thread: the goroutine could otherwise
	// run on another thread between the two, and the first would stay
	// bound (LockOSThread nests: a locked caller stays locked).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil || !set.IsSet(c) || set.Count() < n || set.Count() < 2 {
		return false
	}
	set.Clear(c)
	if unix.SchedSetaffinity(0, &set) != nil {
		return false
	}
	if h := testMoved; h != nil {
		h()
	}
	set.Set(c)
	// If this fails the thread stays off c only; it can run elsewhere.
	unix.SchedSetaffinity(0, &set)
	return true
}

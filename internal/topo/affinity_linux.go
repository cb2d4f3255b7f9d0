package topo

import (
	"runtime"

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

//go:build !linux

package topo

import "runtime"

// AllowedCPUs returns the CPUs this process may run on: where the system
// does not say, every CPU.
func AllowedCPUs() ([]int, error) {
	cpus := make([]int, runtime.NumCPU())
	for i := range cpus {
		cpus[i] = i
	}
	return cpus, nil
}

// ThreadCPUs returns the CPUs the calling thread may run on: every CPU.
func ThreadCPUs() ([]int, error) { return AllowedCPUs() }

// Pin does nothing where threads cannot be given CPUs.
func Pin(cpus []int) error { return nil }

// WithCPUs runs f: where threads cannot be given CPUs, nothing is bound.
func WithCPUs(cpus []int, f func() error) error { return f() }

// BindProcess does nothing where threads cannot be given CPUs.
func BindProcess(cpus []int) error { return nil }

// CurrentCPU returns -1: where the thread runs is not known here.
func CurrentCPU() int { return -1 }

// MoveOff does nothing where threads cannot be given CPUs.
func MoveOff(c, n int) bool { return false }

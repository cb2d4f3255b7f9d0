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

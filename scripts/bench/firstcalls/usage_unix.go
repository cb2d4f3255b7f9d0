//go:build unix

package main

import (
	"syscall"
	"time"
)

// usage is what getrusage says of this process: CPU time, minor page
// faults, voluntary and involuntary context switches.
type usage struct {
	cpu                   time.Duration
	minflt, nvcsw, nivcsw int64
}

func readUsage() usage {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return usage{}
	}
	return usage{cpu: time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)),
		minflt: int64(ru.Minflt), nvcsw: int64(ru.Nvcsw), nivcsw: int64(ru.Nivcsw)}
}

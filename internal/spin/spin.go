// Package spin holds what the transports' polling waits share.
package spin

// YieldCPU gives the calling thread's CPU to another runnable thread of any
// process, if there is one (sched_yield on Linux); elsewhere it does
// nothing. Unlike runtime.Gosched, it lets other processes run: waits use
// it when the ranks on a machine outnumber its CPUs.
func YieldCPU() { yieldCPU() }

package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// currentCPU returns the CPU the calling thread runs on, or -1.
func currentCPU() int {
	var cpu uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), 0, 0); e != 0 {
		return -1
	}
	return int(cpu)
}

package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// cpu returns the CPU the calling thread runs on, or -1.
func cpu() int64 {
	var c uint32
	if _, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&c)), 0, 0); e != 0 {
		return -1
	}
	return int64(c)
}

package shm

import (
	"math"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Futex operations on shared (not process-private) words.
const (
	futexWait = 0 // FUTEX_WAIT
	futexWake = 1 // FUTEX_WAKE
)

// futexSleep sleeps while *addr == val, for at most d, or until woken. It
// may return early for any reason; callers re-check their condition. ts
// is scratch space owned by the caller, so that the call does not
// allocate.
func futexSleep(addr *uint32, val uint32, d time.Duration, ts *unix.Timespec) {
	*ts = unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait,
		uintptr(val), uintptr(unsafe.Pointer(ts)), 0, 0)
}

// futexWakeAll wakes every process sleeping on addr.
func futexWakeAll(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake,
		math.MaxInt32, 0, 0, 0)
}

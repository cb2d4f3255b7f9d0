package topo

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The memory policy modes and flags of mbind(2) (linux/mempolicy.h), which
// golang.org/x/sys does not define.
const (
	mpolPreferred = 1
	mpolMFMove    = 1 << 1
)

// LocalHomeNode is HomeNode for the calling process on this machine: -1
// on a machine of one node, when the process may run on CPUs of several
// nodes, or when the machine cannot be read.
func LocalHomeNode() int {
	m, err := Probe(System())
	if err != nil || len(m.Nodes) < 2 {
		return -1
	}
	cpus, err := AllowedCPUs()
	if err != nil {
		return -1
	}
	return HomeNode(m, cpus)
}

// Place asks the kernel to keep the pages of b on NUMA node node
// (mbind(2) with MPOL_PREFERRED: another node when this one is full), and
// to move there the pages of b this process maps and no other does. b
// must start on a page boundary. For a shared file mapping (a shared
// memory segment) the policy is the file's, so it also places the pages
// other processes fault in later within that range.
func Place(b []byte, node int) error {
	if len(b) == 0 {
		return nil
	}
	if node < 0 || node >= 1023 {
		return errors.New("topo: place: NUMA node out of range")
	}
	var mask [1024 / 64]uint64
	mask[node/64] = 1 << (node % 64)
	_, _, e := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)),
		mpolPreferred, uintptr(unsafe.Pointer(&mask[0])), uintptr(len(mask)*64), mpolMFMove)
	if e != 0 {
		return e
	}
	return nil
}

package rma

import (
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hcomm-go/hcomm/internal/shmdir"
)

var shmDir = "/dev/shm"

const haveSegments = true

// createSegment makes and maps a segment with room for data bytes.
func createSegment(data int, nonce uint32) (*segment, error) {
	size := segBytes(data)
	sweepStale()
	name := fmt.Sprintf("%s%d-%016x", segPrefix, os.Getpid(), rand.Uint64())
	s := &segment{path: filepath.Join(shmDir, name)}
	fd, err := unix.Open(s.path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", s.path, err)
	}
	defer unix.Close(fd)
	fail := func(err error) (*segment, error) {
		s.unmap()
		s.unlink()
		return nil, err
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail(fmt.Errorf("size %s: %w", s.path, err))
	}
	// Reserve the pages: a page tmpfs cannot supply later would be a SIGBUS.
	if err := unix.Fallocate(fd, 0, 0, int64(size)); err != nil && err != unix.EOPNOTSUPP {
		return fail(fmt.Errorf("reserve %d bytes in %s: %w", size, shmDir, err))
	}
	if s.mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail(fmt.Errorf("map %s: %w", s.path, err))
	}
	atomic.StoreUint32(s.u32(hdrVersion), segVersion)
	atomic.StoreUint64(s.u64(hdrSize), uint64(data))
	atomic.StoreUint32(s.u32(hdrPid), uint32(os.Getpid()))
	atomic.StoreUint32(s.u32(hdrNonce), nonce)
	atomic.StoreUint64(s.u64(hdrMagic), segMagic)
	return s, nil
}

// openSegment maps a peer's segment and checks it against what the peer
// announced: the name's form, the file's size, the header.
func openSegment(name string, data int, nonce uint32) (*segment, error) {
	if !validName(name) {
		return nil, fmt.Errorf("invalid window segment name %q", name)
	}
	s := &segment{path: filepath.Join(shmDir, name)}
	fd, err := unix.Open(s.path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", s.path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", s.path, err)
	}
	want := segBytes(data)
	if st.Size != int64(want) {
		return nil, fmt.Errorf("segment %s has %d bytes, want %d", s.path, st.Size, want)
	}
	if s.mem, err = unix.Mmap(fd, 0, want, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return nil, fmt.Errorf("map %s: %w", s.path, err)
	}
	if atomic.LoadUint64(s.u64(hdrMagic)) != segMagic || atomic.LoadUint32(s.u32(hdrVersion)) != segVersion ||
		atomic.LoadUint64(s.u64(hdrSize)) != uint64(data) || atomic.LoadUint32(s.u32(hdrNonce)) != nonce {
		s.unmap()
		return nil, fmt.Errorf("segment %s does not hold the announced window", s.path)
	}
	return s, nil
}

// sweepStale removes window segments left by processes that died between
// making a window and the barrier after which its name is unlinked.
func sweepStale() { shmdir.SweepStale(shmDir, segPrefix, 10*time.Second, nil) }

func validName(name string) bool {
	rest, ok := strings.CutPrefix(name, segPrefix)
	if !ok || len(name) > 64 || rest == "" {
		return false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && c != '-' {
			return false
		}
	}
	return true
}

func (s *segment) name() string { return filepath.Base(s.path) }

func (s *segment) unmap() {
	if s.mem != nil {
		_ = unix.Munmap(s.mem)
		s.mem = nil
	}
}

func (s *segment) unlink() {
	_ = unix.Unlink(s.path)
}

// hostKey identifies the memory domain of this process: the kernel boot
// and the network namespace. Peers with the same key try to map each
// other's segments (which fails safely when their /dev/shm differ); ranks
// in other network namespaces are treated as other hosts. The mount
// namespace is left out: ip netns exec makes one per command.
func hostKey() [32]byte {
	h := sha256.New()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	h.Write(boot)
	for _, ns := range []string{"/proc/self/ns/net"} {
		l, _ := os.Readlink(ns)
		h.Write([]byte(l))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// machineKey identifies the kernel this process runs on (its boot): ranks
// with the same key share the machine's CPUs, whatever their namespaces.
func machineKey() [8]byte {
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	h := sha256.Sum256(append([]byte("machine:"), boot...))
	return [8]byte(h[:8])
}

// Futex operations on shared words.
const (
	futexWait = 0
	futexWake = 1
)

func futexSleep(addr *uint32, val uint32, d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWait,
		uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
}

func futexWakeAll(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWake,
		math.MaxInt32, 0, 0, 0)
}

// maxIov bounds the iovecs of one process_vm call (IOV_MAX).
const maxIov = 1024

// cmaRows moves rows rows of n bytes between local memory (loc, rows at
// locPitch) and the peer process pid's memory at base+off (rows at
// remPitch), writing when write is set. The caller has checked both
// ranges. It returns an error wrapping unix.ESRCH when the process is
// gone.
func cmaRows(pid int, write bool, loc []byte, locPitch int, base uintptr, off, rows, n, remPitch int) error {
	if n == 0 {
		return nil
	}
	rows = max(rows, 1)
	var lv [64]unix.Iovec
	var rv [64]unix.RemoteIovec
	for r := 0; r < rows; {
		k := min(rows-r, len(lv))
		for i := range k {
			p := loc[(r+i)*locPitch : (r+i)*locPitch+n]
			lv[i].Base = &p[0]
			lv[i].SetLen(n)
			rv[i] = unix.RemoteIovec{Base: base + uintptr(off+(r+i)*remPitch), Len: n}
		}
		want := k * n
		var got int
		var err error
		if write {
			got, err = unix.ProcessVMWritev(pid, lv[:k], rv[:k], 0)
		} else {
			got, err = unix.ProcessVMReadv(pid, lv[:k], rv[:k], 0)
		}
		if err != nil {
			return err
		}
		if got != want {
			// A partial transfer: finish row by row.
			if got%n != 0 {
				return fmt.Errorf("process_vm moved %d of %d bytes", got, want)
			}
			k = got / n
			if k == 0 {
				return fmt.Errorf("process_vm moved nothing")
			}
		}
		r += k
	}
	return nil
}

// cmaProbe reports whether this process may use process_vm_* on pid.
func cmaProbe(pid int, base uintptr, size int) error {
	if size == 0 {
		return nil
	}
	var b [1]byte
	return cmaRows(pid, false, b[:], 1, base, 0, 1, 1, 1)
}

func pidAlive(pid int) bool { return shmdir.Alive(pid) }

var errProcessGone = unix.ESRCH

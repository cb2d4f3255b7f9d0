package rma

import "unsafe"

// A window's segment is a file in /dev/shm (Linux; Go memory elsewhere): a header page, a page holding
// the signal words and the futex word their waiters sleep on, and for
// AllocWindow the exposed bytes. Local peers map it to reach the signals
// (and the bytes) directly.
const (
	segMagic   = 0x574f_444e_4957_4d48 // "HMWINDOW" read as little endian
	segVersion = 1
	pageSize   = 4096
	segPrefix  = "hcomm-win-"

	hdrMagic   = 0
	hdrVersion = 8
	hdrSize    = 16
	hdrPid     = 24
	hdrNonce   = 28

	sigPage    = pageSize
	bellOff    = sigPage + 8*NumSignals
	waitersOff = bellOff + 128
	dataOff    = 2 * pageSize
)

type segment struct {
	mem  []byte
	path string
}

func (s *segment) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }
func (s *segment) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&s.mem[off])) }

// sigs returns the signal words.
func (s *segment) sigs() *[NumSignals]uint64 {
	return (*[NumSignals]uint64)(unsafe.Pointer(&s.mem[sigPage]))
}

func (s *segment) data(n int) []byte { return s.mem[dataOff : dataOff+n : dataOff+n] }

func segBytes(data int) int { return dataOff + (data+pageSize-1)/pageSize*pageSize }

//go:build !linux

package rma

import (
	"crypto/rand"
	"errors"
	"time"
	"unsafe"
)

// Elsewhere than Linux a window's segment is ordinary memory of this
// process, no peer is local, and everything travels by messages.

const haveSegments = false

var errNoSegments = errors.New("shared windows need Linux")

func createSegment(data int, nonce uint32) (*segment, error) {
	words := make([]uint64, segBytes(data)/8)
	mem := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	return &segment{mem: mem}, nil
}

func openSegment(name string, data int, nonce uint32) (*segment, error) {
	return nil, errNoSegments
}

func (s *segment) name() string { return "" }
func (s *segment) unmap()       { s.mem = nil }
func (s *segment) unlink()      {}

func hostKey() (k [32]byte) {
	rand.Read(k[:])
	return k
}

func machineKey() (k [8]byte) {
	rand.Read(k[:])
	return k
}

func futexSleep(addr *uint32, val uint32, d time.Duration) {
	time.Sleep(min(d, 50*time.Microsecond))
}

func futexWakeAll(addr *uint32) {}

func cmaRows(pid int, write bool, loc []byte, locPitch int, base uintptr, off, rows, n, remPitch int) error {
	return errNoSegments
}

func cmaProbe(pid int, base uintptr, size int) error { return errNoSegments }

func pidAlive(pid int) bool { return true }

var errProcessGone = errors.New("process gone")

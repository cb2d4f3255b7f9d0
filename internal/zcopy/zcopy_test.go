package zcopy

import (
	"encoding/binary"
	"testing"
)

// A peer's record is untrusted: decoding and range checks never panic,
// and what they accept lies inside the buffer.
func FuzzRecord(f *testing.F) {
	var rec [RecSize]byte
	encode(rec[:], FlagIn|FlagOut, 1, 1, 64, 100)
	f.Add(rec[:], 0, 100)
	f.Add([]byte{1, 2, 3}, 0, 0)
	mem := make([]byte, 4096)
	f.Fuzz(func(t *testing.T, b []byte, lo, n int) {
		flags, _, _, inOff, outOff, err := Decode(b)
		if err != nil {
			return
		}
		if flags&^(FlagIn|FlagOut|FlagBig|FlagDone) != 0 {
			t.Fatalf("flags %#x accepted", flags)
		}
		for _, off := range []uint64{inOff, outOff} {
			tail, ok := Tail(mem, off)
			if !ok {
				if off <= uint64(len(mem)) {
					t.Fatalf("Tail(%d) refused", off)
				}
				continue
			}
			r := &Registry{recs: []record{{in: tail}}}
			if s, err := r.peer(0, false, lo, n); err == nil {
				if len(s) != n || lo < 0 || uint64(lo+n) > uint64(len(mem))-off {
					t.Fatalf("peer(%d, %d) from %d accepted %d bytes", lo, n, off, len(s))
				}
			}
		}
	})
}

func TestDecode(t *testing.T) {
	var ok [RecSize]byte
	encode(ok[:], FlagIn, 3, 0, 8, 0)
	for _, tc := range []struct {
		name string
		mut  func(b []byte) []byte
		bad  bool
	}{
		{"good", func(b []byte) []byte { return b }, false},
		{"short", func(b []byte) []byte { return b[:RecSize-1] }, true},
		{"magic", func(b []byte) []byte { b[0]++; return b }, true},
		{"flags", func(b []byte) []byte { b[2] |= 16; return b }, true},
		{"reserved", func(b []byte) []byte { b[3] = 1; return b }, true},
		{"cpu", func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], 1); return b }, false},
	} {
		b := append([]byte(nil), ok[:]...)
		flags, in, _, off, _, err := Decode(tc.mut(b))
		if (err != nil) != tc.bad {
			t.Errorf("%s: err %v", tc.name, err)
		}
		if !tc.bad && (flags != FlagIn || in != 3 || off != 8) {
			t.Errorf("%s: decoded %d %d %d", tc.name, flags, in, off)
		}
	}
}

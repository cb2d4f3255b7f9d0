package shm

import (
	"bytes"
	"testing"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/wire"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []msgHeader{
		{kind: kindInline},
		{kind: kindInline, length: 12345, fp: wire.Fingerprint{Seq: 1 << 60, Coll: sched.AllReduce,
			DType: reduce.Float32, Op: reduce.Max, Root: -3, Count: -1}},
		{kind: kindCMA, length: 1 << 40, fp: wire.Fingerprint{Coll: wire.CollSendRecv, Root: 1 << 30},
			addr: 0xc000123456},
	} {
		b := bytes.Repeat([]byte{0xff}, hdrSize)
		h.encode(b)
		got, err := decodeHeader(b)
		if err != nil || got != h {
			t.Errorf("decode(encode(%+v)) = %+v, %v", h, got, err)
		}
	}
}

func TestHeaderInvalid(t *testing.T) {
	good := make([]byte, hdrSize)
	(&msgHeader{kind: kindInline, length: 1}).encode(good)
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:hdrSize-1] }},
		{"empty", func(b []byte) []byte { return nil }},
		{"kind zero", func(b []byte) []byte { b[4] = 0; return b }},
		{"kind unknown", func(b []byte) []byte { b[4] = 3; return b }},
		{"length 2^63", func(b []byte) []byte { b[15] = 0x80; return b }},
	} {
		b := tc.edit(append([]byte(nil), good...))
		if h, err := decodeHeader(b); err == nil {
			t.Errorf("%s: decoded %+v", tc.name, h)
		}
	}
}

func FuzzDecodeHeader(f *testing.F) {
	b := make([]byte, hdrSize)
	(&msgHeader{kind: kindInline, length: 77, fp: wire.Fingerprint{Seq: 5, Count: 9}}).encode(b)
	f.Add(b)
	(&msgHeader{kind: kindCMA, length: 1 << 20, addr: 1 << 40}).encode(b)
	f.Add(b)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHeader(b)
		if err != nil {
			return
		}
		again := make([]byte, hdrSize)
		h.encode(again)
		h2, err := decodeHeader(again)
		if err != nil || h2 != h {
			t.Fatalf("re-encoding %+v gave %+v, %v", h, h2, err)
		}
	})
}

package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hcomm-go/hcomm/internal/reduce"
	"github.com/hcomm-go/hcomm/internal/sched"
)

func TestFingerprintRoundTrip(t *testing.T) {
	for _, f := range []Fingerprint{
		{},
		{Seq: 1, Coll: sched.AllReduce, DType: reduce.Float32, Op: reduce.Sum, Count: 1000},
		{Seq: math.MaxUint64, Coll: CollSendRecv, DType: reduce.Int8, Root: -7, Count: math.MinInt64},
		{Seq: 42, Coll: 255, DType: 255, Op: 255, Root: math.MaxInt32, Count: math.MaxInt64},
	} {
		var b [FingerprintSize]byte
		f.MarshalTo(b[:])
		var g Fingerprint
		if err := g.Unmarshal(b[:]); err != nil {
			t.Fatalf("Unmarshal(%v): %v", f, err)
		}
		if g != f {
			t.Errorf("round trip: got %+v, want %+v", g, f)
		}
	}
}

func TestFingerprintUnmarshalErrors(t *testing.T) {
	var f Fingerprint
	if err := f.Unmarshal(make([]byte, FingerprintSize-1)); !errors.Is(err, ErrMalformed) {
		t.Errorf("short buffer: err = %v, want ErrMalformed", err)
	}
	b := make([]byte, FingerprintSize)
	b[23] = 1
	if err := f.Unmarshal(b); !errors.Is(err, ErrMalformed) {
		t.Errorf("reserved byte set: err = %v, want ErrMalformed", err)
	}
}

func validDataHeader() FrameHeader {
	return FrameHeader{
		Type:        FrameData,
		Len:         100,
		Total:       300,
		Fingerprint: Fingerprint{Seq: 9, Coll: sched.AllGather, DType: reduce.Uint8, Count: 300},
	}
}

func TestFrameHeaderRoundTrip(t *testing.T) {
	for _, h := range []FrameHeader{
		validDataHeader(),
		{Type: FrameData},
		{Type: FrameData, Len: 1 << 40, Total: 1 << 41},
		{Type: FrameData, Paths: 0x8005, Len: 7, Total: 9},
		{Type: FrameAbort, Len: MaxAbortReason},
		{Type: FrameStripe, Len: 7, Offset: 1 << 40, Fingerprint: Fingerprint{Seq: 3}},
		{Type: FrameStripe, Flags: FlagCRC32C, Checksum: 9, Paths: 2, Len: 1, Offset: 1<<64 - 2},
		{Type: FrameRejoin, Paths: 2, Total: 1},
		{Type: FrameRejoin, Paths: 0x8000, Total: MaxGen},
		{Type: FramePing},
		{Type: FrameLead, Paths: 1, Total: 0, Len: 0},
		{Type: FrameLead, Paths: 0x8000, Total: 1 << 40, Len: 4096},
		{Type: FrameLead, Paths: 1, Total: 1<<64 - 2, Len: 1},
		{Type: FrameLead, Paths: 4, Offset: 1<<40 + 4096, Total: 1 << 40, Len: 4096},
		{Type: FrameData, Flags: FlagCRC32C, Checksum: 9, Paths: 0x8003, First: 15, Len: 10, Total: 30},
	} {
		var b [FrameHeaderSize]byte
		h.MarshalTo(b[:])
		var g FrameHeader
		if err := g.Unmarshal(b[:]); err != nil {
			t.Fatalf("Unmarshal(%+v): %v", h, err)
		}
		if g != h {
			t.Errorf("round trip: got %+v, want %+v", g, h)
		}
	}
}

func TestFrameHeaderUnmarshalRejects(t *testing.T) {
	encode := func(h FrameHeader) []byte {
		b := make([]byte, FrameHeaderSize)
		h.MarshalTo(b)
		return b
	}
	tests := []struct {
		name string
		b    func() []byte
	}{
		{"empty", func() []byte { return nil }},
		{"short", func() []byte { return encode(validDataHeader())[:FrameHeaderSize-1] }},
		{"type 0", func() []byte { h := validDataHeader(); h.Type = 0; return encode(h) }},
		{"type 7", func() []byte { h := validDataHeader(); h.Type = 7; return encode(h) }},
		{"ping with fingerprint", func() []byte { h := validDataHeader(); h.Type = FramePing; return encode(h) }},
		{"ping with payload", func() []byte { return encode(FrameHeader{Type: FramePing, Len: 1}) }},
		{"ping with total", func() []byte { return encode(FrameHeader{Type: FramePing, Total: 1}) }},
		{"ping with paths", func() []byte { return encode(FrameHeader{Type: FramePing, Paths: 2}) }},
		{"ping with flags", func() []byte { return encode(FrameHeader{Type: FramePing, Flags: FlagCRC32C}) }},
		{"lead without paths", func() []byte { return encode(FrameHeader{Type: FrameLead, Total: 1}) }},
		{"lead leaving two paths", func() []byte { return encode(FrameHeader{Type: FrameLead, Paths: 3, Total: 1}) }},
		{"lead past 2^64", func() []byte { return encode(FrameHeader{Type: FrameLead, Paths: 1, Total: 1<<64 - 1, Len: 2}) }},
		{"lead begun past its end", func() []byte { return encode(FrameHeader{Type: FrameLead, Paths: 1, Offset: 11, Total: 5, Len: 5}) }},
		{"first stripe's path on a whole message", func() []byte { return encode(FrameHeader{Type: FrameData, First: 1, Len: 5, Total: 5}) }},
		{"first stripe's path on a stripe", func() []byte {
			b := encode(FrameHeader{Type: FrameStripe, Paths: 1, Len: 5})
			b[1] |= 1 << 4
			return b
		}},
		{"lead with lost flag", func() []byte { return encode(FrameHeader{Type: FrameLead, Flags: FlagLost, Paths: 1}) }},
		{"lead with a checksum", func() []byte {
			return encode(FrameHeader{Type: FrameLead, Flags: FlagCRC32C, Checksum: 5, Paths: 1, Len: 1})
		}},
		{"lead with fingerprint", func() []byte {
			b := encode(FrameHeader{Type: FrameLead, Paths: 1})
			b[FrameHeaderSize-1] = 1
			return b
		}},
		{"rejoin without paths", func() []byte { return encode(FrameHeader{Type: FrameRejoin, Total: 1}) }},
		{"rejoin of generation 0", func() []byte { return encode(FrameHeader{Type: FrameRejoin, Paths: 2}) }},
		{"rejoin past MaxGen", func() []byte { return encode(FrameHeader{Type: FrameRejoin, Paths: 2, Total: MaxGen + 1}) }},
		{"rejoin with payload", func() []byte { return encode(FrameHeader{Type: FrameRejoin, Paths: 2, Total: 1, Len: 1}) }},
		{"rejoin with flags", func() []byte { return encode(FrameHeader{Type: FrameRejoin, Flags: FlagCRC32C, Paths: 2, Total: 1}) }},
		{"rejoin with fingerprint", func() []byte {
			b := encode(FrameHeader{Type: FrameRejoin, Paths: 2, Total: 1})
			b[FrameHeaderSize-1] = 1
			return b
		}},
		{"stripe past 2^64", func() []byte {
			return encode(FrameHeader{Type: FrameStripe, Len: 2, Offset: 1<<64 - 1})
		}},
		{"lost flag on stripe", func() []byte { return encode(FrameHeader{Type: FrameStripe, Flags: FlagLost}) }},
		{"stripe fingerprint reserved", func() []byte {
			b := encode(FrameHeader{Type: FrameStripe, Len: 1})
			b[FrameHeaderSize-1] = 1
			return b
		}},
		{"unknown flag", func() []byte { h := validDataHeader(); h.Flags = 4; return encode(h) }},
		{"lost flag on data", func() []byte { h := validDataHeader(); h.Flags = FlagLost; return encode(h) }},
		{"lost rank beyond 2^32", func() []byte {
			return encode(FrameHeader{Type: FrameAbort, Flags: FlagLost, Total: 1 << 32})
		}},
		{"crc flag on abort", func() []byte { return encode(FrameHeader{Type: FrameAbort, Flags: FlagCRC32C, Len: 3}) }},
		{"checksum without flag", func() []byte { h := validDataHeader(); h.Checksum = 7; return encode(h) }},
		{"paths on abort", func() []byte { return encode(FrameHeader{Type: FrameAbort, Paths: 1, Len: 3}) }},
		{"len over total", func() []byte { h := validDataHeader(); h.Len = h.Total + 1; return encode(h) }},
		{"fingerprint reserved", func() []byte { b := encode(validDataHeader()); b[FrameHeaderSize-1] = 1; return b }},
		{"abort reason too long", func() []byte { return encode(FrameHeader{Type: FrameAbort, Len: MaxAbortReason + 1}) }},
		{"abort with total", func() []byte { return encode(FrameHeader{Type: FrameAbort, Len: 3, Total: 3}) }},
		{"abort with fingerprint", func() []byte {
			return encode(FrameHeader{Type: FrameAbort, Fingerprint: Fingerprint{Seq: 1}})
		}},
		{"garbage", func() []byte { return bytes.Repeat([]byte{0xA5}, FrameHeaderSize) }},
		{"text", func() []byte { return []byte(strings.Repeat("GET / HTTP/1.1\r\n", 4)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h FrameHeader
			if err := h.Unmarshal(tt.b()); !errors.Is(err, ErrMalformed) {
				t.Errorf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestLostAbortFrame(t *testing.T) {
	for _, lost := range []int{-1, 0, 3, 1<<32 - 1} {
		b := AppendLostAbortFrame(nil, "lost it", lost)
		var h FrameHeader
		if err := h.Unmarshal(b); err != nil {
			t.Fatalf("lost %d: %v", lost, err)
		}
		if got := h.Flags&FlagLost != 0; got != (lost >= 0) || lost >= 0 && h.Total != uint64(lost) {
			t.Errorf("lost %d: header %+v", lost, h)
		}
		if string(b[FrameHeaderSize:]) != "lost it" {
			t.Errorf("lost %d: reason %q", lost, b[FrameHeaderSize:])
		}
	}
}

func TestAppendAbortFrame(t *testing.T) {
	tests := []struct {
		reason, want string
	}{
		{"", ""},
		{"rank 3 ran out of memory", "rank 3 ran out of memory"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{strings.Repeat("x", MaxAbortReason+10), strings.Repeat("x", MaxAbortReason)},
		// A multi-byte rune straddling the limit is dropped whole.
		{strings.Repeat("x", MaxAbortReason-1) + "é", strings.Repeat("x", MaxAbortReason-1)},
	}
	for _, tt := range tests {
		b := AppendAbortFrame([]byte("prefix"), tt.reason)
		if !bytes.HasPrefix(b, []byte("prefix")) {
			t.Fatalf("AppendAbortFrame dropped the prefix")
		}
		b = b[len("prefix"):]
		var h FrameHeader
		if err := h.Unmarshal(b); err != nil {
			t.Fatalf("Unmarshal: %v", err)
		}
		if h.Type != FrameAbort || int(h.Len) != len(b)-FrameHeaderSize {
			t.Fatalf("header %+v for %d payload bytes", h, len(b)-FrameHeaderSize)
		}
		if got := AbortReason(b[FrameHeaderSize:]); got != tt.want {
			t.Errorf("reason = %.40q..., want %.40q...", got, tt.want)
		}
	}
}

func validHandshake() Handshake {
	h := Handshake{Version: HandshakeVersion, CommID: 0xC0FFEE, Rank: 1, Target: 3, Size: 4, Socket: 1, Sockets: 2, Gen: 9}
	for i := range h.Nonce {
		h.Nonce[i] = byte(i * 7)
	}
	return h
}

func TestHandshakeRoundTrip(t *testing.T) {
	h := validHandshake()
	var b [HandshakeSize]byte
	h.MarshalTo(b[:])
	if string(b[:4]) != HandshakeMagic {
		t.Fatalf("encoding starts with %q", b[:4])
	}
	var g Handshake
	if err := g.Unmarshal(b[:]); err != nil {
		t.Fatal(err)
	}
	if g != h {
		t.Errorf("round trip: got %+v, want %+v", g, h)
	}
}

// TestProofsBind checks that a proof verifies only for the exact exchange
// it was made for: every field of the handshake, both nonces, the key, the
// job, and (for the listener) the status and reason change it, and the two
// sides' proofs differ.
func TestProofsBind(t *testing.T) {
	token := [TokenSize]byte{1, 2, 3}
	key := HandshakeKey(&token, "job-1")
	h := validHandshake()
	nonce := [NonceSize]byte{9, 9, 9}
	dp := DialerProof(&key, &h, &nonce)
	lp := ListenerProof(&key, &h, &nonce, ReplyAccept, "")
	if !ProofEqual(&dp, &dp) || ProofEqual(&dp, &lp) {
		t.Fatal("the dialer's and the listener's proofs must differ")
	}
	otherToken := token
	otherToken[31] = 1
	keys := map[string][ProofSize]byte{
		"token": HandshakeKey(&otherToken, "job-1"),
		"job":   HandshakeKey(&token, "job-2"),
	}
	for name, k := range keys {
		if p := DialerProof(&k, &h, &nonce); ProofEqual(&p, &dp) {
			t.Errorf("another %s gives the same dialer proof", name)
		}
	}
	mods := map[string]func(*Handshake){
		"comm id":      func(h *Handshake) { h.CommID++ },
		"rank":         func(h *Handshake) { h.Rank = 0 },
		"target":       func(h *Handshake) { h.Target = 2 },
		"size":         func(h *Handshake) { h.Size++ },
		"socket":       func(h *Handshake) { h.Socket = 0 },
		"sockets":      func(h *Handshake) { h.Sockets++ },
		"dialer nonce": func(h *Handshake) { h.Nonce[5] ^= 1 },
	}
	for name, mod := range mods {
		g := h
		mod(&g)
		if p := DialerProof(&key, &g, &nonce); ProofEqual(&p, &dp) {
			t.Errorf("changing the %s keeps the dialer proof", name)
		}
		if p := ListenerProof(&key, &g, &nonce, ReplyAccept, ""); ProofEqual(&p, &lp) {
			t.Errorf("changing the %s keeps the listener proof", name)
		}
	}
	n2 := nonce
	n2[0] ^= 1
	if p := DialerProof(&key, &h, &n2); ProofEqual(&p, &dp) {
		t.Error("changing the listener nonce keeps the dialer proof")
	}
	if p := ListenerProof(&key, &h, &nonce, ReplyRefuse, ""); ProofEqual(&p, &lp) {
		t.Error("changing the status keeps the listener proof")
	}
	if p := ListenerProof(&key, &h, &nonce, ReplyAccept, "x"); ProofEqual(&p, &lp) {
		t.Error("changing the reason keeps the listener proof")
	}
}

func TestHandshakeUnmarshalRejects(t *testing.T) {
	encode := func(mod func(*Handshake)) []byte {
		h := validHandshake()
		mod(&h)
		b := make([]byte, HandshakeSize)
		h.MarshalTo(b)
		return b
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"truncated", encode(func(*Handshake) {})[:HandshakeSize-1]},
		{"magic", func() []byte { b := encode(func(*Handshake) {}); b[0] = 'X'; return b }()},
		{"rank out of range", encode(func(h *Handshake) { h.Rank = 4 })},
		{"target out of range", encode(func(h *Handshake) { h.Target = 9 })},
		{"empty world", encode(func(h *Handshake) { h.Size, h.Rank, h.Target = 0, 0, 0 })},
		{"to itself", encode(func(h *Handshake) { h.Target = h.Rank })},
		{"socket out of range", encode(func(h *Handshake) { h.Socket = 2 })},
		{"no sockets", encode(func(h *Handshake) { h.Socket, h.Sockets = 0, 0 })},
		{"http", []byte(strings.Repeat("GET / HTTP/1.1\r\nHost: x\r\n", 3))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Handshake
			if err := h.Unmarshal(tt.b); !errors.Is(err, ErrMalformed) {
				t.Errorf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestHandshakeReplyRoundTrip(t *testing.T) {
	for _, r := range []HandshakeReply{
		{Version: HandshakeVersion, Status: ReplyAccept, Data: [ProofSize]byte{3, 77}},
		{Version: HandshakeVersion, Status: ReplyChallenge, Data: [ProofSize]byte{31: 1}},
		{Version: HandshakeVersion, Status: ReplyRefuse, Reason: "authentication failed"},
		{Version: HandshakeVersion, Status: ReplyAborted, Reason: "rank 1 aborted: out of memory"},
	} {
		b := r.AppendTo(nil)
		got, err := ReadHandshakeReply(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("ReadHandshakeReply(%+v): %v", r, err)
		}
		if got != r {
			t.Errorf("round trip: got %+v, want %+v", got, r)
		}
	}
	long := HandshakeReply{Version: HandshakeVersion, Status: ReplyRefuse, Reason: CutReason(strings.Repeat("ü", 200))}
	got, err := ReadHandshakeReply(bytes.NewReader(long.AppendTo(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Reason) > MaxReplyReason || !utf8.ValidString(got.Reason) || !strings.HasPrefix(long.Reason, got.Reason) {
		t.Errorf("long reason came back as %d bytes %q", len(got.Reason), got.Reason)
	}
}

func TestReadHandshakeReplyRejects(t *testing.T) {
	good := (&HandshakeReply{Version: HandshakeVersion, Status: ReplyRefuse, Reason: "no"}).AppendTo(nil)
	mod := func(i int, v byte) []byte {
		b := bytes.Clone(good)
		b[i] = v
		return b
	}
	tests := []struct {
		name    string
		b       []byte
		wantEOF bool
	}{
		{"empty", nil, true},
		{"short header", good[:ReplyHeaderSize-1], true},
		{"short reason", good[:len(good)-1], true},
		{"magic", mod(1, 'x'), false},
		{"status 0", mod(6, 0), false},
		{"status 5", mod(6, 5), false},
		{"challenge with a reason", mod(6, uint8(ReplyChallenge)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadHandshakeReply(bytes.NewReader(tt.b))
			switch {
			case err == nil:
				t.Fatal("accepted")
			case tt.wantEOF && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
				t.Errorf("err = %v, want an EOF error", err)
			case !tt.wantEOF && !errors.Is(err, ErrMalformed):
				t.Errorf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

// TestHandshakeVersions: a handshake or reply of another version is a
// *VersionError naming both versions (ErrVersion, not ErrMalformed), and
// one of a version with this layout is decoded all the same, so that a
// listener can prove to the dialer that the versions differ.
func TestHandshakeVersions(t *testing.T) {
	for _, v := range []uint16{0, 1, 2, 3, 4, FirstVersion, HandshakeVersion - 1, HandshakeVersion + 1, 255} {
		if v == HandshakeVersion {
			continue
		}
		h := Handshake{Version: v, CommID: 7, Rank: 2, Target: 1, Size: 3, Socket: 1, Sockets: 2, Gen: 1}
		h.Nonce[3] = 9
		b := make([]byte, HandshakeSize)
		h.MarshalTo(b)
		var d Handshake
		err := d.Unmarshal(b)
		var ve *VersionError
		if !errors.As(err, &ve) || !errors.Is(err, ErrVersion) || errors.Is(err, ErrMalformed) || ve.Local != HandshakeVersion || ve.Remote != v {
			t.Fatalf("version %d: err = %v, want a VersionError{%d, %d}", v, err, HandshakeVersion, v)
		}
		if msg := err.Error(); !strings.Contains(msg, fmt.Sprintf("version %d", v)) || !strings.Contains(msg, fmt.Sprintf("version %d", HandshakeVersion)) {
			t.Errorf("version %d: %q does not name both versions", v, msg)
		}
		if want := (Handshake{}); v < FirstVersion && d != want {
			t.Errorf("version %d (another layout) decoded: %+v", v, d)
		}
		if v >= FirstVersion && d != h {
			t.Errorf("version %d: decoded %+v, want %+v", v, d, h)
		}
		// Inconsistent is malformed whatever the version.
		h.Target = h.Rank
		h.MarshalTo(b)
		if err := d.Unmarshal(b); v >= FirstVersion && !errors.Is(err, ErrMalformed) {
			t.Errorf("version %d handshake to itself: err = %v, want ErrMalformed", v, err)
		}

		r := HandshakeReply{Version: v, Status: ReplyRefuse, Reason: "malformed handshake"}
		got, err := ReadHandshakeReply(bytes.NewReader(r.AppendTo(nil)))
		if !errors.As(err, &ve) || ve.Local != HandshakeVersion || ve.Remote != v || got != r {
			t.Errorf("reply of version %d: %+v, %v; want it decoded with a VersionError", v, got, err)
		}
	}
}

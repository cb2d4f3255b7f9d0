package wire

import (
	"bytes"
	"testing"
)

func FuzzDecodeFrameHeader(f *testing.F) {
	seed := func(h FrameHeader) {
		b := make([]byte, FrameHeaderSize)
		h.MarshalTo(b)
		f.Add(b)
	}
	seed(validDataHeader())
	seed(FrameHeader{Type: FrameData, Len: 1 << 40, Total: 1 << 40})
	seed(FrameHeader{Type: FrameData, Flags: FlagCRC32C, Checksum: 3, Paths: 6, First: 2, Len: 100, Total: 300})
	f.Add(AppendAbortFrame(nil, "stop"))
	seed(FrameHeader{Type: FrameStripe, Flags: FlagCRC32C, Checksum: 7, Paths: 2, Len: 5, Offset: 1 << 20})
	seed(FrameHeader{Type: FrameRejoin, Paths: 6, Total: 3})
	seed(FrameHeader{Type: FramePing})
	seed(FrameHeader{Type: FrameLead, Paths: 1, Total: 1 << 20, Len: 300})
	seed(FrameHeader{Type: FrameLead, Paths: 2, Offset: 1<<20 + 100, Total: 1 << 20, Len: 300})
	seed(FrameHeader{Type: FrameLead, Flags: FlagCRC32C, Checksum: 1, Paths: 4, Total: 7, Len: 1})
	f.Add([]byte("HCOM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h FrameHeader
		if err := h.Unmarshal(b); err != nil {
			return
		}
		if h.Type == FrameData && h.Len > h.Total {
			t.Fatalf("accepted a stripe longer than its message: %+v", h)
		}
		if h.First != 0 && (h.Type != FrameData || h.Paths == 0 || h.First >= 16) {
			t.Fatalf("accepted a first stripe's path on a frame that is not a striped message's: %+v", h)
		}
		if h.Type == FrameRejoin && (h.Paths == 0 || h.Len != 0 || h.Total == 0 || h.Total > MaxGen) {
			t.Fatalf("accepted a rejoin without paths, with a payload or out of the generations: %+v", h)
		}
		if h.Type == FramePing && (h != FrameHeader{Type: FramePing}) {
			t.Fatalf("accepted a ping that carries something: %+v", h)
		}
		if h.Type == FrameStripe && (h.Offset+h.Len < h.Offset || h.Total != 0) {
			t.Fatalf("accepted a stripe past 2^64 or with a total: %+v", h)
		}
		if h.Type == FrameLead && (h.Paths == 0 || h.Paths&(h.Paths-1) != 0 || h.Total+h.Len < h.Total || h.Offset > h.Total+h.Len || h.Fingerprint != (Fingerprint{}) || h.Flags != 0) {
			t.Fatalf("accepted a lead frame leaving no or several paths, past 2^64, with a fingerprint or flags: %+v", h)
		}
		if h.Type == FrameAbort && h.Len > MaxAbortReason {
			t.Fatalf("accepted an overlong abort reason: %+v", h)
		}
		// A valid encoding is canonical: re-encoding gives the same bytes.
		out := make([]byte, FrameHeaderSize)
		h.MarshalTo(out)
		if !bytes.Equal(out, b[:FrameHeaderSize]) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b[:FrameHeaderSize], out)
		}
	})
}

func FuzzDecodeHandshake(f *testing.F) {
	h := validHandshake()
	b := make([]byte, HandshakeSize)
	h.MarshalTo(b)
	f.Add(b)
	f.Add(b[:10])
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var h Handshake
		if err := h.Unmarshal(b); err != nil {
			return
		}
		if h.Rank >= h.Size || h.Target >= h.Size || h.Rank == h.Target || h.Socket >= h.Sockets {
			t.Fatalf("accepted an inconsistent handshake: %+v", h)
		}
		// A proof made for a decoded handshake verifies only for it.
		var key [ProofSize]byte
		var nonce [NonceSize]byte
		p := DialerProof(&key, &h, &nonce)
		g := h
		g.Nonce[0] ^= 1
		if q := DialerProof(&key, &g, &nonce); ProofEqual(&p, &q) {
			t.Fatal("a proof does not depend on the dialer nonce")
		}
		out := make([]byte, HandshakeSize)
		h.MarshalTo(out)
		if !bytes.Equal(out, b[:HandshakeSize]) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b[:HandshakeSize], out)
		}
	})
}

func FuzzReadHandshakeReply(f *testing.F) {
	f.Add((&HandshakeReply{Version: HandshakeVersion, Status: ReplyAccept, Data: [ProofSize]byte{2, 5}}).AppendTo(nil))
	f.Add((&HandshakeReply{Version: HandshakeVersion, Status: ReplyChallenge, Data: [ProofSize]byte{7}}).AppendTo(nil))
	f.Add((&HandshakeReply{Version: HandshakeVersion, Status: ReplyRefuse, Reason: "authentication failed"}).AppendTo(nil))
	f.Add([]byte("HCOM\x02\x00\x02\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ReadHandshakeReply(bytes.NewReader(b))
		if err != nil {
			return
		}
		if r.Status == ReplyChallenge && r.Reason != "" {
			t.Fatalf("accepted a challenge with a reason: %+v", r)
		}
		if len(r.Reason) > MaxReplyReason {
			t.Fatalf("accepted a %d-byte reason", len(r.Reason))
		}
		_ = r.PrintableReason()
		out := r.AppendTo(nil)
		back, err := ReadHandshakeReply(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("re-encoded reply does not decode: %v", err)
		}
		if back != r {
			t.Fatalf("round trip: got %+v, want %+v", back, r)
		}
	})
}

func FuzzFingerprint(f *testing.F) {
	f.Add(make([]byte, FingerprintSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		var fp Fingerprint
		if err := fp.Unmarshal(b); err != nil {
			return
		}
		_ = fp.String()
		out := make([]byte, FingerprintSize)
		fp.MarshalTo(out)
		if !bytes.Equal(out, b[:FingerprintSize]) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b[:FingerprintSize], out)
		}
	})
}

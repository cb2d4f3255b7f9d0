package tcp

import (
	"context"
	"errors"
	"hash/crc32"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// TestChecksum: frames with a CRC32C are verified, whatever the receiver's
// own setting: a good one is delivered, a corrupted one is reported as
// corruption and the pair is closed.
func TestChecksum(t *testing.T) {
	// Two real transports with checksums on exchange data correctly.
	w := newWorld(t, 2, 2)
	a, b := w.transport(0), w.transport(1)
	a.crc, b.crc = true, true
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := make([]byte, 200<<10) // striped over both sockets
	fill(msg, 0, 1)
	fp := fpFor(1, len(msg))
	done := make(chan error, 1)
	go func() { done <- a.Send(ctx, 1, &fp, msg) }()
	got := make([]byte, len(msg))
	if err := b.Recv(ctx, 0, &fp, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := check(got, 0, 1); err != nil {
		t.Fatal(err)
	}

	// A raw rank 0 sends one good and one corrupted frame to rank 3.
	w2 := newWorld(t, 4, 1)
	server := w2.transport(3)
	c, err := net.Dial("tcp", w2.addrs[3])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rep, err := rawHandshake(c, 0, 3, 4, 1, nil); err != nil || rep.Status != wire.ReplyAccept {
		t.Fatalf("handshake: %v %v", rep, err)
	}
	frame := func(payload []byte, sum uint32) []byte {
		h := wire.FrameHeader{Type: wire.FrameData, Flags: wire.FlagCRC32C, Checksum: sum,
			Len: uint64(len(payload)), Total: uint64(len(payload)), Fingerprint: fpFor(2, len(payload))}
		b := make([]byte, wire.FrameHeaderSize)
		h.MarshalTo(b)
		return append(b, payload...)
	}
	payload := []byte("eight by")
	sum := crc32.Checksum(payload, crc32.MakeTable(crc32.Castagnoli))
	c.Write(frame(payload, sum))
	c.Write(frame(payload, sum^1))
	fp2 := fpFor(2, len(payload))
	buf := make([]byte, len(payload))
	if err := server.Recv(ctx, 0, &fp2, buf); err != nil || string(buf) != string(payload) {
		t.Fatalf("good frame: %q, %v", buf, err)
	}
	err = server.Recv(ctx, 0, &fp2, buf)
	var pe *errs.PeerError
	if !errors.As(err, &pe) || pe.Peer != 0 || !strings.Contains(err.Error(), "CRC32C") {
		t.Fatalf("corrupted frame: %v, want a PeerError for rank 0 naming the CRC32C failure", err)
	}
}

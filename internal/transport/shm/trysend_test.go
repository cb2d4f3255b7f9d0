//go:build linux

package shm

import (
	"bytes"
	"context"
	"testing"
)

// TestTrySend: TrySend delivers what fits in a free slot, in order with
// ordinary sends, and declines (sending nothing) when the ring is full or
// the message needs more than one slot.
func TestTrySend(t *testing.T) {
	trs := newLocalGroup(t, 2, "default")
	ctx := context.Background()
	a, b := trs[0], trs[1]
	slots := int(a.peers[1].out.slots)
	small := []byte("eight by")
	for i := 0; i < slots; i++ {
		ok, err := a.TrySend(ctx, 1, &dataFP, small)
		if err != nil || !ok {
			t.Fatalf("TrySend %d into a ring of %d free slots: %v, %v", i, slots, ok, err)
		}
	}
	if ok, err := a.TrySend(ctx, 1, &dataFP, small); ok || err != nil {
		t.Fatalf("TrySend into a full ring: %v, %v; want false, nil", ok, err)
	}
	big := make([]byte, len(a.peers[1].out.slot(0)))
	if ok, err := a.TrySend(ctx, 1, &dataFP, big); ok || err != nil {
		t.Fatalf("TrySend of a message larger than a slot: %v, %v; want false, nil", ok, err)
	}
	buf := make([]byte, len(small))
	for i := 0; i < slots; i++ {
		if err := b.Recv(ctx, 0, &dataFP, buf); err != nil || !bytes.Equal(buf, small) {
			t.Fatalf("Recv %d: %q, %v", i, buf, err)
		}
	}
	// After a declined TrySend the stream is intact: an ordinary send
	// follows.
	done := make(chan error, 1)
	go func() { done <- a.Send(ctx, 1, &dataFP, big) }()
	got := make([]byte, len(big))
	if err := b.Recv(ctx, 0, &dataFP, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

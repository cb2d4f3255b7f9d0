//go:build linux

package shm

import (
	"bytes"
	"context"
	"runtime"
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

// TestTrySendSlots: with GOMAXPROCS 1 and a CPU per rank, TrySend also
// sends a message of several slots when that many are free, and declines
// (sending nothing) when fewer are; with more Ps, or ranks sharing CPUs,
// it leaves such messages to Send.
func TestTrySendSlots(t *testing.T) {
	trs := newLocalGroup(t, 2, "nocma")
	ctx := context.Background()
	a, b := trs[0], trs[1]
	a.oversubscribed = true // whatever this machine's CPUs
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if ok, err := a.TrySend(ctx, 1, &dataFP, make([]byte, 2*len(a.peers[1].out.slot(0)))); ok || err != nil {
		t.Fatalf("TrySend of two slots by ranks sharing CPUs: %v, %v; want false, nil", ok, err)
	}
	a.oversubscribed = false
	slotBytes := len(a.peers[1].out.slot(0))
	msg := make([]byte, 2*slotBytes+slotBytes/2) // three slots
	fill(msg, 5)
	small := []byte("eight by")
	runtime.GOMAXPROCS(2)
	if ok, err := a.TrySend(ctx, 1, &dataFP, msg); ok || err != nil {
		t.Fatalf("TrySend of three slots with GOMAXPROCS 2: %v, %v; want false, nil", ok, err)
	}
	runtime.GOMAXPROCS(1)
	// Two of the four slots taken: three do not fit.
	for i := 0; i < 2; i++ {
		if ok, err := a.TrySend(ctx, 1, &dataFP, small); !ok || err != nil {
			t.Fatalf("TrySend %d: %v, %v", i, ok, err)
		}
	}
	if ok, err := a.TrySend(ctx, 1, &dataFP, msg); ok || err != nil {
		t.Fatalf("TrySend of three slots into two free ones: %v, %v; want false, nil", ok, err)
	}
	buf := make([]byte, len(small))
	for i := 0; i < 2; i++ {
		if err := b.Recv(ctx, 0, &dataFP, buf); err != nil || !bytes.Equal(buf, small) {
			t.Fatalf("Recv %d: %q, %v", i, buf, err)
		}
	}
	if ok, err := a.TrySend(ctx, 1, &dataFP, msg); !ok || err != nil {
		t.Fatalf("TrySend of three slots into four free ones: %v, %v; want true, nil", ok, err)
	}
	got := make([]byte, len(msg))
	if err := b.Recv(ctx, 0, &dataFP, got); err != nil {
		t.Fatal(err)
	}
	if err := check(got, 5); err != nil {
		t.Fatal(err)
	}
}

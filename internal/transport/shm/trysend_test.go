//go:build linux

package shm

import (
	"bytes"
	"context"
	"runtime"
	"testing"
)

// TestTrySend: TrySend delivers what fits in a free slot, in order with
// ordinary sends, and declines (sending nothing) when the ring is full or,
// with several Ps, when the message needs more than one slot (TestTrySendSlots
// covers GOMAXPROCS 1, where it sends those too).
func TestTrySend(t *testing.T) {
	trs := newLocalGroup(t, 2, "nocma")
	ctx := context.Background()
	a, b := trs[0], trs[1]
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	slots := int(a.peers[1].out.slots)
	slotBytes := len(a.peers[1].out.slot(0))
	// Into a free ring: a whole slot's worth goes, a byte more does not.
	full := make([]byte, slotBytes)
	fill(full, 3)
	if ok, err := a.TrySend(ctx, 1, &dataFP, full); !ok || err != nil {
		t.Fatalf("TrySend of one slot's worth into a free ring: %v, %v; want true, nil", ok, err)
	}
	got := make([]byte, slotBytes)
	if err := b.Recv(ctx, 0, &dataFP, got); err != nil {
		t.Fatal(err)
	}
	if err := check(got, 3); err != nil {
		t.Fatal(err)
	}
	big := make([]byte, slotBytes+1)
	fill(big, 4)
	if ok, err := a.TrySend(ctx, 1, &dataFP, big); ok || err != nil {
		t.Fatalf("TrySend of a slot and a byte into a free ring with GOMAXPROCS 2: %v, %v; want false, nil", ok, err)
	}
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
	buf := make([]byte, len(small))
	for i := 0; i < slots; i++ {
		if err := b.Recv(ctx, 0, &dataFP, buf); err != nil || !bytes.Equal(buf, small) {
			t.Fatalf("Recv %d: %q, %v", i, buf, err)
		}
	}
	// After the declined TrySends the stream is intact: an ordinary send
	// follows.
	done := make(chan error, 1)
	go func() { done <- a.Send(ctx, 1, &dataFP, big) }()
	got = make([]byte, len(big))
	if err := b.Recv(ctx, 0, &dataFP, got); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := check(got, 4); err != nil {
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

//go:build linux

package shm

import (
	"context"
	"testing"
)

// TestArrived: Arrived tells whether a Recv would find a message at once,
// without taking it; bad peers and a closed transport report false.
func TestArrived(t *testing.T) {
	trs := newLocalGroup(t, 2, "nocma")
	ctx := context.Background()
	a, b := trs[0], trs[1]
	if b.Arrived(0) {
		t.Fatal("Arrived before anything was sent")
	}
	msg := []byte("eight by")
	if ok, err := a.TrySend(ctx, 1, &dataFP, msg); !ok || err != nil {
		t.Fatalf("TrySend: %v, %v", ok, err)
	}
	for range 2 {
		if !b.Arrived(0) {
			t.Fatal("Arrived is false with a message in the ring")
		}
	}
	if a.Arrived(1) {
		t.Fatal("Arrived on the sender's side")
	}
	got := make([]byte, len(msg))
	if err := b.Recv(ctx, 0, &dataFP, got); err != nil || string(got) != string(msg) {
		t.Fatalf("Recv after Arrived: %q, %v", got, err)
	}
	if b.Arrived(0) {
		t.Fatal("Arrived after the only message was received")
	}
	for _, p := range []int{-1, 1, 2} {
		if b.Arrived(p) {
			t.Fatalf("Arrived(%d) on rank 1 of 2", p)
		}
	}
	if ok, err := a.TrySend(ctx, 1, &dataFP, msg); !ok || err != nil {
		t.Fatalf("TrySend: %v, %v", ok, err)
	}
	b.Close()
	if b.Arrived(0) {
		t.Fatal("Arrived on a closed transport")
	}
}

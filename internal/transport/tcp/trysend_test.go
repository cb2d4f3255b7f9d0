package tcp

import (
	"context"
	"testing"
	"time"
)

// TestTrySend checks that small messages go at once and large ones are
// left to Send.
func TestTrySend(t *testing.T) {
	w := newWorld(t, 2, 1)
	a, b := w.transport(0), w.transport(1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, size := range []int{0, 8, eagerMax} {
		fp := fpFor(size, size)
		p := make([]byte, size)
		fill(p, 0, size)
		ok, err := a.TrySend(ctx, 1, &fp, p)
		if !ok || err != nil {
			t.Fatalf("TrySend(%d bytes) = %v, %v; want true, nil", size, ok, err)
		}
		got := make([]byte, size)
		if err := b.Recv(ctx, 0, &fp, got); err != nil {
			t.Fatal(err)
		}
		if err := check(got, 0, size); err != nil {
			t.Fatal(err)
		}
	}
	fp := fpFor(1, eagerMax+1)
	if ok, err := a.TrySend(ctx, 1, &fp, make([]byte, eagerMax+1)); ok || err != nil {
		t.Fatalf("TrySend(%d bytes) = %v, %v; want false, nil", eagerMax+1, ok, err)
	}
	// Nothing was sent: the next message is the one b receives.
	fp = fpFor(2, 3)
	if err := a.Send(ctx, 1, &fp, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := b.Recv(ctx, 0, &fp, make([]byte, 3)); err != nil {
		t.Fatalf("after a refused TrySend: %v", err)
	}
}

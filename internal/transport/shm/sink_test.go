//go:build linux

package shm

import (
	"context"
	"testing"
)

// sumSink adds each delivered byte into acc at its offset.
type sumSink struct {
	acc     []byte
	staging []byte
	calls   int
}

func (s *sumSink) Consume(off int, b []byte) {
	s.calls++
	for i, v := range b {
		s.acc[off+i] += v
	}
}

func (s *sumSink) Staging() []byte { return s.staging }

// TestRecvSink: a message spanning several slots reaches a sink in order,
// piece by piece straight from the ring (or whole, through the staging
// buffer, when it travels by single copy); a mismatched one reaches it not
// at all.
func TestRecvSink(t *testing.T) {
	for _, variant := range []string{"nocma", "default"} {
		t.Run(variant, func(t *testing.T) { testRecvSink(t, variant) })
	}
}

func testRecvSink(t *testing.T, variant string) {
	trs := newLocalGroup(t, 2, variant)
	ctx := context.Background()
	a, b := trs[0], trs[1]
	n := 3*len(a.peers[1].out.slot(0)) + 5
	msg := make([]byte, n)
	for i := range msg {
		msg[i] = byte(i*7 + 1)
	}
	done := make(chan error, 1)
	go func() { done <- a.Send(ctx, 1, &dataFP, msg) }()
	s := &sumSink{acc: make([]byte, n), staging: make([]byte, n)}
	for i := range s.acc {
		s.acc[i] = 1
	}
	if err := b.RecvSink(ctx, 0, &dataFP, n, s); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i := range msg {
		if s.acc[i] != msg[i]+1 {
			t.Fatalf("byte %d = %d, want %d", i, s.acc[i], msg[i]+1)
		}
	}
	if variant == "nocma" && s.calls < 4 {
		t.Errorf("%d pieces for a message of 4 slots", s.calls)
	}
	go func() { done <- a.Send(ctx, 1, &dataFP, msg[:10]) }()
	s2 := &sumSink{acc: make([]byte, 11), staging: make([]byte, 11)}
	if err := b.RecvSink(ctx, 0, &dataFP, 11, s2); err == nil || s2.calls != 0 {
		t.Fatalf("mismatched length: err %v, %d pieces consumed", err, s2.calls)
	}
	<-done
}

//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hcomm-go/hcomm/internal/allocs"
	"github.com/hcomm-go/hcomm/internal/errs"
)

// xorSink is an ExchangeSink over bytes: the reduction is XOR.
type xorSink struct {
	src, dst, recv []byte
}

func (s *xorSink) Reduce(off int, out, in []byte) {
	for i := range in {
		out[i] = s.src[off+i] ^ in[i]
		s.dst[off+i] = out[i]
	}
}

func (s *xorSink) Land(off int, b []byte) { copy(s.recv[off:], b) }

func filled(n, seed int) []byte {
	b := make([]byte, n)
	fill(b, seed)
	return b
}

// TestExchange: both ends of a fused exchange end with the reduction of
// both operands and the peer's reduced half, for messages from empty to
// many slots, of unequal lengths (odd counts split unevenly), on rings of
// two slots and more, in place and not.
func TestExchange(t *testing.T) {
	for _, variant := range []string{"default", "small", "odd"} {
		trs := newLocalGroup(t, 2, variant)
		slot := len(trs[0].peers[1].out.slot(0))
		for _, tc := range [][2]int{{0, 0}, {1, 0}, {10, 11}, {slot, slot}, {slot + 1, slot},
			{3*slot + 5, 3*slot + 4}, {7 * slot, 7 * slot}, {64, 65}} {
			for _, inPlace := range []bool{false, true} {
				name := fmt.Sprintf("%s/%d-%d/inplace=%v", variant, tc[0], tc[1], inPlace)
				t.Run(name, func(t *testing.T) { testExchange(t, trs[0], trs[1], tc[0], tc[1], inPlace) })
			}
		}
	}
}

func testExchange(t *testing.T, a, b *Transport, la, lb int, inPlace bool) {
	ctx := context.Background()
	// Rank 0 owns block 0 (la bytes), rank 1 block 1 (lb bytes); each
	// sends the other's block of its input, reduces its own.
	ins := [2][]byte{filled(la+lb, 1), filled(la+lb, 2)}
	want := make([]byte, la+lb)
	for i := range want {
		want[i] = ins[0][i] ^ ins[1][i]
	}
	outs := [2][]byte{make([]byte, la+lb), make([]byte, la+lb)}
	if inPlace {
		outs[0], outs[1] = append([]byte(nil), ins[0]...), append([]byte(nil), ins[1]...)
		ins = outs
	}
	own := [2][2]int{{0, la}, {la, la + lb}}
	other := [2][2]int{{la, la + lb}, {0, la}}
	done := make(chan error, 2)
	for r, tr := range []*Transport{a, b} {
		o, m := other[r], own[r]
		s := &xorSink{src: ins[r][m[0]:m[1]], dst: outs[r][m[0]:m[1]], recv: outs[r][o[0]:o[1]]}
		go func() {
			done <- tr.Exchange(ctx, 1-r, &dataFP, ins[r][o[0]:o[1]], m[1]-m[0], s)
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for r := range outs {
		for i := range want {
			if outs[r][i] != want[i] {
				t.Fatalf("rank %d byte %d = %d, want %d", r, i, outs[r][i], want[i])
			}
		}
	}
}

// TestExchangeStores: an exchange size's first exchanges alternate the
// sender's slot stores (around the caches, then through them: storepick's
// trials), each with the right bytes, and each exchange that completes
// is timed for that size's chooser on both ends.
func TestExchangeStores(t *testing.T) {
	trs := newLocalGroup(t, 2, "default")
	slot := len(trs[0].peers[1].out.slot(0))
	la, lb := 3*slot+5, 3*slot+4
	for i := range 4 {
		for r, tr := range trs {
			if got, want := tr.peers[1-r].out.picks.For(la+lb).Plain(), i%2 == 1; got != want {
				t.Fatalf("exchange %d, rank %d: slots through the caches %v, want %v", i, r, got, want)
			}
		}
		testExchange(t, trs[0], trs[1], la, lb, i >= 2)
		for r, tr := range trs {
			if n := tr.peers[1-r].out.picks.For(la + lb).Calls(); n != i+1 {
				t.Fatalf("after exchange %d rank %d's chooser counted %d exchanges, want %d", i, r, n, i+1)
			}
		}
	}
}

// TestExchangeUnfusedPeer: a peer that sends the exchange's first message
// whole (not fused) makes the exchange fail with a mismatch, not hang or
// take the wrong bytes.
func TestExchangeUnfusedPeer(t *testing.T) {
	trs := newLocalGroup(t, 2, "nocma")
	a, b := trs[0], trs[1]
	ctx := context.Background()
	slot := len(a.peers[1].out.slot(0))
	n := 2 * slot
	done := make(chan error, 1)
	go func() { done <- b.Send(ctx, 0, &dataFP, make([]byte, n)) }()
	s := &xorSink{src: make([]byte, n), dst: make([]byte, n), recv: make([]byte, n)}
	err := a.Exchange(ctx, 1, &dataFP, make([]byte, n), n, s)
	var me *errs.MismatchError
	if !errors.As(err, &me) {
		t.Fatalf("exchange against a whole message: %v, want a mismatch", err)
	}
	b.Abort(errors.New("test over"))
	<-done
}

// TestExchangeNoAllocs: a fused exchange allocates nothing.
func TestExchangeNoAllocs(t *testing.T) {
	trs := newLocalGroup(t, 2, "default")
	a, b := trs[0], trs[1]
	ctx := context.Background()
	n := 3 * len(a.peers[1].out.slot(0))
	sa := &xorSink{src: make([]byte, n), dst: make([]byte, n), recv: make([]byte, n)}
	sb := &xorSink{src: make([]byte, n), dst: make([]byte, n), recv: make([]byte, n)}
	sendA, sendB := make([]byte, n), make([]byte, n)
	start, done := make(chan struct{}), make(chan error)
	go func() {
		for range start {
			done <- b.Exchange(ctx, 0, &dataFP, sendB, n, sb)
		}
	}()
	defer close(start)
	step := func() {
		start <- struct{}{}
		if err := a.Exchange(ctx, 1, &dataFP, sendA, n, sa); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := allocs.PerRun(20, 0, step); n != 0 {
		t.Errorf("%v allocations per exchange", n)
	}
}

// TestSendSink: a sent message reaches the sender's sink once, byte for
// byte, piece by piece from the ring (whole from p when it goes by single
// copy or inline), and the receiver gets it unchanged.
func TestSendSink(t *testing.T) {
	for _, variant := range []string{"nocma", "default", "odd"} {
		trs := newLocalGroup(t, 2, variant)
		a, b := trs[0], trs[1]
		ctx := context.Background()
		slot := len(a.peers[1].out.slot(0))
		for _, n := range []int{0, 10, inlineMax + 1, slot, 3*slot + 5} {
			msg := filled(n, n)
			s := &sumSink{acc: make([]byte, n)}
			done := make(chan error, 1)
			go func() { done <- a.SendSink(ctx, 1, &dataFP, msg, s) }()
			got := make([]byte, n)
			if err := b.Recv(ctx, 0, &dataFP, got); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if string(got) != string(msg) || string(s.acc) != string(msg) {
				t.Fatalf("%s %d bytes: received or sunk bytes differ from the message", variant, n)
			}
			if variant == "nocma" && n > slot && s.calls < 4 {
				t.Errorf("%d pieces sunk for a message of 4 slots", s.calls)
			}
		}
	}
}

// copySink copies into dst.
type copySink struct{ dst []byte }

func (s *copySink) Consume(off int, b []byte) { copy(s.dst[off:], b) }
func (s *copySink) Staging() []byte           { return s.dst }

// TestSendRecv: two ranks each send and receive on one goroutine
// (messages of unequal lengths, from empty to many slots), or one of
// them with a separate Send and Recv: both get the other's message, and
// the sender's sink gets its own. A message that would go by single copy
// is refused, with nothing sent.
func TestSendRecv(t *testing.T) {
	for _, variant := range []string{"nocma", "small", "odd"} {
		trs := newLocalGroup(t, 2, variant)
		a, b := trs[0], trs[1]
		ctx := context.Background()
		slot := len(a.peers[1].out.slot(0))
		for _, ns := range [][2]int{{0, 0}, {10, 100}, {slot, 3*slot + 1}, {5*slot + 7, 2 * slot}} {
			for _, plainPeer := range []bool{false, true} {
				msgs := [2][]byte{filled(ns[0], 3), filled(ns[1], 4)}
				if variant == "small" && max(ns[0], ns[1]) > 128<<10 {
					continue
				}
				gots := [2][]byte{make([]byte, ns[1]), make([]byte, ns[0])}
				sunk := make([]byte, ns[0])
				done := make(chan error, 2)
				go func() {
					ok, err := a.SendRecv(ctx, 1, &dataFP, msgs[0], &copySink{sunk}, ns[1], &copySink{gots[0]})
					if !ok && err == nil {
						err = errors.New("refused")
					}
					done <- err
				}()
				if plainPeer {
					go func() { done <- b.Send(ctx, 0, &dataFP, msgs[1]) }()
					if err := b.Recv(ctx, 0, &dataFP, gots[1]); err != nil {
						t.Fatal(err)
					}
				} else {
					go func() {
						_, err := b.SendRecv(ctx, 0, &dataFP, msgs[1], nil, ns[0], &copySink{gots[1]})
						done <- err
					}()
				}
				for range 2 {
					if err := <-done; err != nil {
						t.Fatalf("%s %v plain %v: %v", variant, ns, plainPeer, err)
					}
				}
				if string(gots[0]) != string(msgs[1]) || string(gots[1]) != string(msgs[0]) || string(sunk) != string(msgs[0]) {
					t.Fatalf("%s %v plain %v: wrong bytes", variant, ns, plainPeer)
				}
			}
		}
	}
	trs := newLocalGroup(t, 2, "small")
	big := make([]byte, 256<<10)
	if ok, err := trs[0].SendRecv(context.Background(), 1, &dataFP, big, nil, 0, &copySink{}); ok || err != nil {
		t.Fatalf("single-copy message: %v, %v; want refused", ok, err)
	}
}

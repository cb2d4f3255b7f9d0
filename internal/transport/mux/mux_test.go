package mux

import (
	"context"
	"testing"

	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/transport/local"
	"github.com/hcomm-go/hcomm/internal/wire"
)

// sinky is a transport that claims to receive into sinks straight.
type sinky struct{ transport.Transport }

func (sinky) RecvSink(context.Context, int, *wire.Fingerprint, int, transport.Sink) error { return nil }

// TestSinksTo: the mux reports, per peer, whether the transport that
// reaches it receives into sinks straight.
func TestSinksTo(t *testing.T) {
	f := local.NewFabric(3)
	plain := f.Endpoint(0)
	m, err := New(0, 3, []transport.Transport{nil, sinky{plain}, plain})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		peer int
		want bool
	}{{1, true}, {2, false}, {0, false}, {-1, false}, {3, false}} {
		if got := m.SinksTo(c.peer); got != c.want {
			t.Errorf("SinksTo(%d) = %v, want %v", c.peer, got, c.want)
		}
	}
	// A mux of muxes asks the inner one.
	outer, err := New(0, 3, []transport.Transport{nil, m, m})
	if err != nil {
		t.Fatal(err)
	}
	if !outer.SinksTo(1) || outer.SinksTo(2) {
		t.Errorf("outer mux: SinksTo(1) = %v, SinksTo(2) = %v, want true, false", outer.SinksTo(1), outer.SinksTo(2))
	}
}

// prober is a transport that says whether a message from peer arrived.
type prober struct {
	transport.Transport
	arrived bool
}

func (p prober) Arrived(int) bool { return p.arrived }

// TestArrived: the mux asks the transport that reaches the peer, and
// reports false where that one cannot tell or the peer is bad.
func TestArrived(t *testing.T) {
	f := local.NewFabric(4)
	plain := f.Endpoint(0)
	m, err := New(0, 4, []transport.Transport{nil, prober{plain, true}, prober{plain, false}, plain})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		peer int
		want bool
	}{{1, true}, {2, false}, {3, false}, {0, false}, {-1, false}, {4, false}} {
		if got := m.Arrived(c.peer); got != c.want {
			t.Errorf("Arrived(%d) = %v, want %v", c.peer, got, c.want)
		}
	}
}

package boot

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/store"
)

// chanHandler sends every record's message to a channel.
type chanHandler struct{ ch chan string }

func (h chanHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h chanHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.ch <- r.Message:
	default:
	}
	return nil
}
func (h chanHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h chanHandler) WithGroup(string) slog.Handler      { return h }

// TestConnectProgress: a rank waiting in Connect for ranks that have not
// published their cards says, at INFO, how many have joined and whom it
// waits for.
func TestConnectProgress(t *testing.T) {
	defer func(d time.Duration) { ProgressEvery = d }(ProgressEvery)
	ProgressEvery = 10 * time.Millisecond
	srv, err := store.NewServer(store.ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := store.Open(ctx, "tcp://"+srv.Addr().String(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Ranks 1 and 3 of 5 have joined (as Connect does: card, then count).
	kv := store.WithPrefix(st, "hcomm/world")
	for _, r := range []string{"1", "3"} {
		if err := kv.Set(ctx, "card/"+r, []byte(`{"host":"h`+r+`","addr":"127.0.0.1:1"}`)); err != nil {
			t.Fatal(err)
		}
		kv.Add(ctx, "joined", 1)
	}
	msgs := make(chan string, 100)
	errc := make(chan error, 1)
	go func() {
		_, err := Connect(ctx, Options{Rank: 0, Size: 5, Store: st, CommID: "world", Host: "h0",
			ListenHost: "127.0.0.1", AdvertiseHost: "127.0.0.1", Logger: slog.New(chanHandler{msgs})})
		errc <- err
	}()
	const want = "3/5 ranks joined; waiting for 2, 4"
	for m := range msgs {
		if strings.Contains(m, "ranks joined") {
			if m != want {
				t.Fatalf("progress line %q, want %q", m, want)
			}
			break
		}
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("Connect without ranks 2 and 4 succeeded")
	}
}

func TestPeerClasses(t *testing.T) {
	cards := []Card{{Host: "a"}, {Host: "a"}, {Host: "b"}, {Host: "c"}, {Host: "a"}}
	for _, tc := range []struct {
		o     Options
		local int
		want  string
	}{
		{Options{Rank: 0, Host: "a"}, 3, "shm 2 peers, tcp 2 peers on 2 hosts"},
		{Options{Rank: 2, Host: "b"}, 1, "tcp 4 peers on 2 hosts"},
		{Options{Rank: 0, Host: "a", Transport: "tcp"}, 1, "tcp 4 peers on 3 hosts"},
		{Options{Rank: 0, Host: "a"}, 1, "tcp 2 peers on 2 hosts"},
	} {
		if got := peerClasses(tc.o, cards, tc.local); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.o, got, tc.want)
		}
	}
	if got := peerClasses(Options{}, []Card{{}}, 1); got != "none" {
		t.Errorf("one rank: %q", got)
	}
}

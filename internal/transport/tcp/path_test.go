package tcp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// multiPathWorld makes size in-process transports whose listeners, bound to
// every loopback address, are published as the given addresses (a %d in
// each is the listener's port): one per path.
func multiPathWorld(t testing.TB, size, nsocks int, paths ...string) ([]*Transport, *syncBuffer) {
	t.Helper()
	return multiPathWorldWrap(t, size, nsocks, nil, paths...)
}

// multiPathWorldWrap is multiPathWorld with rank r's listener replaced by
// wrap(r, listener) when wrap is not nil.
func multiPathWorldWrap(t testing.TB, size, nsocks int, wrap func(int, net.Listener) net.Listener, paths ...string) ([]*Transport, *syncBuffer) {
	t.Helper()
	logs := new(syncBuffer)
	lns := make([]net.Listener, size)
	addrs := make([]string, size)
	for r := range size {
		ln, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[r] = ln
		port := ln.Addr().(*net.TCPAddr).Port
		var list []string
		for _, p := range paths {
			list = append(list, fmt.Sprintf(p, port))
		}
		addrs[r] = strings.Join(list, ",")
		if wrap != nil {
			lns[r] = wrap(r, ln)
		}
	}
	return pathTransports(t, lns, addrs, nsocks, 10*time.Second, logs), logs
}

// pathTransports makes one transport per listener, rank r listening on
// lns[r] and every rank publishing addrs, logging to logs; they are closed
// when the test ends.
func pathTransports(t testing.TB, lns []net.Listener, addrs []string, nsocks int, connect time.Duration, logs *syncBuffer) []*Transport {
	t.Helper()
	trs := make([]*Transport, len(lns))
	for r := range trs {
		tr, err := New(Config{Rank: r, Size: len(lns), Token: testToken, CommID: testCommID,
			Listener: lns[r], Addrs: addrs, NSocks: nsocks, ConnectTimeout: connect,
			Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		trs[r] = tr
		t.Cleanup(func() { tr.Close() })
	}
	return trs
}

// TestMultiPath moves messages of every size class between two ranks over
// two loopback paths (and a third that does not connect, which is dropped
// with a log line), and checks that large ones travel on both paths.
func TestMultiPath(t *testing.T) {
	for _, nsocks := range []int{1, 2} {
		t.Run(fmt.Sprintf("nsocks=%d", nsocks), func(t *testing.T) {
			// 127.0.0.1:1 refuses: that path is dropped.
			trs, logs := multiPathWorld(t, 2, nsocks, "127.0.0.1:%d", "127.0.0.1:1", "127.0.0.2:%d")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			sizes := []int{0, 1, 100, eagerMax, stripeMin - 1, stripeMin, 1<<20 + 3, 4 << 20}
			var wg sync.WaitGroup
			errc := make(chan error, 2)
			for r := range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					tr, peer := trs[r], 1-r
					for seq, n := range sizes {
						for round := range 3 {
							fp := fpFor(seq*3+round, n)
							out, in := make([]byte, n), make([]byte, n)
							fill(out, r, seq*3+round)
							var serr error
							done := make(chan struct{})
							go func() { defer close(done); serr = tr.Send(ctx, peer, &fp, out) }()
							if err := tr.Recv(ctx, peer, &fp, in); err != nil {
								errc <- fmt.Errorf("rank %d receive of %d bytes: %v", r, n, err)
								return
							}
							<-done
							if serr != nil {
								errc <- fmt.Errorf("rank %d send of %d bytes: %v", r, n, serr)
								return
							}
							if err := check(in, peer, seq*3+round); err != nil {
								errc <- fmt.Errorf("rank %d, %d bytes: %v", r, n, err)
								return
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errc)
			for err := range errc {
				t.Fatal(err)
			}
			for r, tr := range trs {
				stats := tr.Paths()
				var up, dropped int
				for _, s := range stats {
					if s.Up {
						up++
						if s.Sent == 0 || s.Received == 0 {
							t.Errorf("rank %d: path unused: %v", r, s)
						}
					} else {
						dropped++
					}
				}
				if up != 2 {
					t.Errorf("rank %d: %d paths up, want 2: %v", r, up, stats)
				}
				if r == 0 && dropped != 1 {
					t.Errorf("rank 0 (the dialer): %d paths dropped, want 1: %v", dropped, stats)
				}
			}
			if !strings.Contains(logs.String(), "path does not reach the peer; dropped") || !strings.Contains(logs.String(), "127.0.0.1:1") {
				t.Errorf("no log line for the dropped path:\n%s", logs.String())
			}
		})
	}
}

// TestMultiPathNoneReach: a peer none of whose paths connects is lost, as
// with one path.
func TestMultiPathNoneReach(t *testing.T) {
	trs, _ := multiPathWorld(t, 2, 1, "127.0.0.1:%d", "127.0.0.2:%d")
	trs[1].Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := trs[0].Connect(ctx, []int{1})
	if err == nil || !strings.Contains(err.Error(), "refuse") {
		t.Fatalf("Connect to a closed peer: %v, want a refusal", err)
	}
}

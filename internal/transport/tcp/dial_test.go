package tcp

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// twoRankPaths makes two transports; rank 1 publishes its listener at
// 127.0.0.1 followed by extra (addresses standing for its other paths).
func twoRankPaths(t *testing.T, nsocks int, extra ...string) ([]*Transport, *syncBuffer) {
	t.Helper()
	logs := new(syncBuffer)
	var lns [2]net.Listener
	for r := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[r] = ln
	}
	addrs := []string{lns[0].Addr().String(), strings.Join(append([]string{lns[1].Addr().String()}, extra...), ",")}
	return pathTransports(t, lns[:], addrs, nsocks, 20*time.Second, logs), logs
}

// checkPair connects the two ranks, moves a large and a small message
// each way, and checks that each rank has paths up paths and rank 0
// (the dialer) dropped the others.
func checkPair(t *testing.T, trs []*Transport, up int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runAll(t, trs, func(tr *Transport) error {
		if err := tr.Connect(ctx, []int{1 - tr.rank}); err != nil {
			return err
		}
		for seq, n := range []int{1 << 20, 100} {
			out, in := make([]byte, n), make([]byte, n)
			fill(out, tr.rank, seq)
			fp := fpFor(seq, n)
			sent := make(chan error, 1)
			go func() { sent <- tr.Send(ctx, 1-tr.rank, &fp, out) }()
			if err := tr.Recv(ctx, 1-tr.rank, &fp, in); err != nil {
				return err
			}
			if err := <-sent; err != nil {
				return err
			}
			if err := check(in, 1-tr.rank, seq); err != nil {
				return err
			}
		}
		return nil
	})
	for r, tr := range trs {
		n, dropped := 0, 0
		for _, s := range tr.Paths() {
			if s.Up {
				n++
			} else {
				dropped++
			}
		}
		if n != up {
			t.Errorf("rank %d: %d paths up, want %d: %v", r, n, up, tr.Paths())
		}
		if r == 0 && n+dropped != len(tr.paths[1]) {
			t.Errorf("rank 0: %d paths up and %d dropped of %d: %v", n, dropped, len(tr.paths[1]), tr.Paths())
		}
	}
}

// TestPathElsewhere: an extra address of the peer that reaches another
// listener (the same private address on two hosts: the dialer's own host
// answers) is dropped with a log line, and the pair works on the paths
// left, whoever answers there.
func TestPathElsewhere(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		serve      func(t *testing.T, ln net.Listener) // answers at the stray address
	}{
		{"another protocol", "another protocol", func(t *testing.T, ln net.Listener) {
			var wg sync.WaitGroup
			t.Cleanup(wg.Wait)
			t.Cleanup(func() { ln.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					io.WriteString(c, "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
					c.Close()
				}
			}()
		}},
		{"another job", "authentication failed", func(t *testing.T, ln net.Listener) {
			other := testToken
			other[0]++
			strayTransport(t, ln, Config{Rank: 1, Size: 2, Token: other, CommID: testCommID})
		}},
		{"another communicator", "communicator", func(t *testing.T, ln net.Listener) {
			strayTransport(t, ln, Config{Rank: 1, Size: 2, Token: testToken, CommID: testCommID + 1})
		}},
		{"another rank", "meant for rank 1", func(t *testing.T, ln net.Listener) {
			// The dialer's own rank at the same port on its host.
			strayTransport(t, ln, Config{Rank: 0, Size: 2, Token: testToken, CommID: testCommID})
		}},
	} {
		for _, nsocks := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/nsocks=%d", tc.name, nsocks), func(t *testing.T) {
				ln, err := net.Listen("tcp", "127.0.0.3:0")
				if err != nil {
					t.Fatal(err)
				}
				trs, logs := twoRankPaths(t, nsocks, ln.Addr().String())
				tc.serve(t, ln)
				checkPair(t, trs, 1)
				l := logs.String()
				if !strings.Contains(l, "path reaches another listener than the peer's; dropped") || !strings.Contains(l, tc.want) {
					t.Errorf("no log line for the dropped path saying %q:\n%s", tc.want, l)
				}
			})
		}
	}
}

// strayTransport serves ln with a transport of cfg (its other fields
// filled in): a listener of the job, or of another one, that is not the
// peer's.
func strayTransport(t *testing.T, ln net.Listener, cfg Config) {
	t.Helper()
	cfg.Listener = ln
	cfg.Addrs = make([]string, cfg.Size)
	cfg.Addrs[cfg.Rank] = ln.Addr().String()
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
}

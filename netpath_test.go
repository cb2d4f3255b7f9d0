package hcomm

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/store"
)

// TestNetPaths: two ranks over TCP with two network paths (two loopback
// addresses) see both paths to each other, up, and after their
// collectives have returned, the bytes one sent are exactly those the
// other received.
func TestNetPaths(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fs, err := store.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	const n, elems = 2, 1 << 20 // 4 MiB: striped
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			c, err := Init(ctx, &Config{Rank: r, Size: n, Rendezvous: fs, Token: "netpath-test",
				Transport: "tcp", SocketAddr: "127.0.0.1,127.0.0.2"})
			if err != nil {
				errs[r] = err
				return
			}
			comms[r] = c
			v := make([]float32, elems)
			for range 3 {
				if err := AllReduce(ctx, c, v, v, Sum); err != nil {
					errs[r] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, c := range comms {
		defer c.Close()
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	var sent, recv [n]uint64
	for r, c := range comms {
		ps := c.NetPaths()
		if len(ps) != 2 {
			t.Fatalf("rank %d: %d paths, want 2: %+v", r, len(ps), ps)
		}
		for i, p := range ps {
			if p.Peer != 1-r || p.Path != i || !p.Up || p.Local == "" || p.Remote == "" {
				t.Errorf("rank %d: path %d: %+v", r, i, p)
			}
			sent[r] += p.Sent
			recv[r] += p.Received
		}
	}
	// A 2-rank AllReduce sends every rank's whole buffer once (half in
	// the reduce-scatter, half in the all-gather) whatever the algorithm
	// cuts it into, or more.
	for r := range n {
		if sent[r] < 3*4*elems || sent[r] != recv[1-r] {
			t.Errorf("rank %d sent %d bytes, rank %d received %d; want equal and ≥ %d", r, sent[r], 1-r, recv[1-r], 3*4*elems)
		}
	}
	// On a communicator without TCP peers there is nothing.
	cs, err := NewLocal(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs[1].Close()
	defer cs[0].Close()
	if ps := cs[0].NetPaths(); ps != nil {
		t.Errorf("NewLocal: paths %+v", ps)
	}
}

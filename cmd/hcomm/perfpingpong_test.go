package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/hcomm-go/hcomm"
)

func TestPerfPingPong(t *testing.T) {
	var out bytes.Buffer
	args := []string{"-local", "-n", "4", "-op", "pingpong", "-b", "8", "-e", "4K", "-f", "8", "-T", "0.002", "-csv"}
	if err := perfMain(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	rows, err := readRows(strings.NewReader(out.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4 (8 B to 4 KiB):\n%s", len(rows), out.String())
	}
	for _, r := range rows {
		if r.Op != "pingpong" || r.Ranks != 4 || r.Usec <= 0 {
			t.Errorf("row %+v", r)
		}
	}
	out.Reset()
	err = perfMain([]string{"-local", "-n", "3", "-op", "pingpong", "-b", "8", "-e", "8", "-T", "0.002", "-csv"}, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error()+out.String(), "odd") {
		t.Errorf("3 ranks: %v\n%s", err, out.String())
	}
}

// TestPingPongVerifies: both ends of a pair hold the first rank's bytes
// after a round trip, and not before.
func TestPingPongVerifies(t *testing.T) {
	comms := localComms(t, 2)
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Go(func() {
			b := benchOps["pingpong"].setup(c, 64, false, hcomm.DTypeUint8, hcomm.Sum)
			b.fill()
			if w := b.wrong(); w == 0 {
				t.Errorf("rank %d: output before the call counted as right", c.Rank())
			}
			if err := b.run(context.Background()); err != nil {
				t.Error(err)
				return
			}
			if w := b.wrong(); w != 0 {
				t.Errorf("rank %d: %d wrong after a round trip", c.Rank(), w)
			}
		})
	}
	wg.Wait()
}

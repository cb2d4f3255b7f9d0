package hcomm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMultiPathIdlePing: 2 hosts × 1 rank over two links (the store on a
// third). After a few AllReduces striped over both, the job goes idle and
// host 1's eth1 goes down. With nothing sent, both ranks' idle pings on
// the eth1 path go unacknowledged, and each rank retires the path before
// its next collective; the AllReduces after that are right.
func TestMultiPathIdlePing(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	cl, mark, flags := markedTwoHostJob(t)
	done := make(chan error, 1)
	go func() {
		if !waitFile(t, mark) {
			done <- nil
			return
		}
		done <- exec.Command("ip", "-n", cl.hosts[1], "link", "set", "eth1", "down").Run()
	}()
	out, err := launch(t, flags, []string{"ip", "netns", "exec", cl.hosts[0]}, "pathsidle", "HCOMM_TEST_MARK="+mark)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "why=\"idle ping"); n < 2 {
		t.Errorf("%d WARN lines for the path retired by its idle pings, want one per rank at least:\n%s", n, out)
	}
	figures, _ := os.ReadFile(mark + ".figures")
	t.Logf("idle link down: %s", figures)
}

// rankPathsIdle: AllReduces over both paths, then, idle, rank 0 marks the
// parent to take eth1 down, and each rank waits (no message sent) until
// it retired the eth1 path; then checked AllReduces.
func rankPathsIdle(t *testing.T, c *Comm) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const count = 256 << 10 // 1 MiB: stripes over both paths
	buf := make([]float32, count)
	peer := 1 - c.Rank()
	run := func(i int) {
		for j := range buf {
			buf[j] = float32((c.Rank()+1)*(i%7+1) + j%5)
		}
		if err := AllReduce(ctx, c, buf, buf, Sum); err != nil {
			t.Fatalf("AllReduce %d: %v", i, err)
		}
		for j := range buf {
			if want := float32(3*(i%7+1) + 2*(j%5)); buf[j] != want {
				t.Fatalf("AllReduce %d: element %d is %v, want %v", i, j, buf[j], want)
			}
		}
	}
	for i := range 4 {
		run(i)
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	retired := func() bool {
		for _, s := range tcpOf(t, c, peer).Paths() {
			if s.Retired {
				if !strings.Contains(s.Local+s.Remote, netnsSubnet2+".") {
					t.Fatalf("rank %d retired the wrong path: %v", c.Rank(), s)
				}
				return true
			}
		}
		return false
	}
	if retired() {
		t.Fatalf("rank %d: a path retired before the link went down: %v", c.Rank(), tcpOf(t, c, peer).Paths())
	}
	start := time.Now()
	if c.Rank() == 0 {
		if err := os.WriteFile(os.Getenv("HCOMM_TEST_MARK"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for !retired() {
		select {
		case <-ctx.Done():
			t.Fatalf("rank %d: the path over the downed link was not retired while idle: %v", c.Rank(), tcpOf(t, c, peer).Paths())
		case <-time.After(10 * time.Millisecond):
		}
	}
	took := time.Since(start)
	for i := 4; i < 7; i++ {
		run(i)
	}
	if c.Rank() == 0 {
		line := fmt.Sprintf("rank 0 retired the path %v after marking the link to go down, idle; rank 0: %v",
			took.Round(time.Millisecond), tcpOf(t, c, peer).Paths())
		os.WriteFile(os.Getenv("HCOMM_TEST_MARK")+".figures", []byte(line), 0o644)
	}
}

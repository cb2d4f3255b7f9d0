package hcomm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMultiPathFirstDown: 2 hosts × 1 rank over two links (the store on a
// third); in the middle of a loop of checked AllReduces, small (on the
// pair's lead stream alone) and large (striped) in turn, the link of the
// FIRST path goes down (host 1's eth0). Both ranks move their lead streams
// to eth1, and the loop goes on with the right results and no error. Then
// the link comes back: eth0's path is dialed again and carries stripes
// again, still with the right results.
func TestMultiPathFirstDown(t *testing.T) {
	firstDown(t, false)
}

// TestMultiPathFirstDownSockets is TestMultiPathFirstDown with two sockets
// per path (HCOMM_NSOCKS=2): the first path's second socket carries
// stripes of the large AllReduces, which the move of the lead stream sends
// again on the new lead.
func TestMultiPathFirstDownSockets(t *testing.T) {
	firstDown(t, false, "-x", "HCOMM_NSOCKS=2")
}

// TestMultiPathFirstDownOneWay is TestMultiPathFirstDown with one-way
// traffic before each AllReduce: rank 0 broadcasts a small message then a
// large one while rank 1 only receives. What rank 0 sends once the link is
// down is lost until its lead moves, so rank 1 waits for a lost small
// message while the large one's stripe on eth1 stands in front of the
// lead frame: rank 1 must read that stripe ahead (lead.go) to see the
// frame.
func TestMultiPathFirstDownOneWay(t *testing.T) {
	firstDown(t, true)
}

// firstDown runs TestMultiPathFirstDown, with the Broadcasts if oneway.
func firstDown(t *testing.T, oneway bool, extra ...string) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	if oneway {
		// INFO: the line saying a stripe was read ahead.
		extra = append(extra, "-x", "HCOMM_TEST_ONEWAY=1", "-x", "HCOMM_DEBUG=INFO")
	}
	cl, mark, flags := markedTwoHostJob(t, extra...)
	done := make(chan error, 1)
	var down time.Time
	go func() {
		if !waitFile(t, mark) {
			done <- nil
			return
		}
		down = time.Now()
		if err := exec.Command("ip", "-n", cl.hosts[1], "link", "set", "eth0", "down").Run(); err != nil {
			done <- err
			return
		}
		if err := os.WriteFile(mark+".down", nil, 0o644); err != nil {
			done <- err
			return
		}
		if !waitFile(t, mark+".up") {
			done <- nil
			return
		}
		done <- exec.Command("ip", "-n", cl.hosts[1], "link", "set", "eth0", "up").Run()
	}()
	start := time.Now()
	out, err := launch(t, flags, []string{"ip", "netns", "exec", cl.hosts[0]}, "pathsfirst",
		"HCOMM_TEST_MARK="+mark)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Each rank names the stopped path in a WARN: path 0, on eth0.
	for r := range 2 {
		named := false
		for _, l := range strings.Split(out, "\n") {
			named = named || strings.Contains(l, "level=WARN") && strings.Contains(l, fmt.Sprintf(" rank=%d ", r)) &&
				strings.Contains(l, " path=0 ") && strings.Contains(l, " local="+netnsSubnet+".")
		}
		if !named {
			t.Errorf("rank %d: no WARN naming the stopped first path (path=0, local=%s.*):\n%s", r, netnsSubnet, lastLines(out, 80))
		}
	}
	// The failover time: the longest an AllReduce took to complete from
	// the link going down, or from its start if later (rank 0's clock is
	// this host's): the one that waited for the lead to move.
	var failover time.Duration
	times, _ := os.ReadFile(mark + ".times")
	for _, line := range strings.Split(strings.TrimSpace(string(times)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		s, _ := strconv.ParseInt(f[0], 10, 64)
		e, _ := strconv.ParseInt(f[1], 10, 64)
		from := time.Unix(0, s)
		if from.Before(down) {
			from = down
		}
		if end := time.Unix(0, e); end.After(from) {
			failover = max(failover, end.Sub(from))
		}
	}
	figures, _ := os.ReadFile(mark + ".figures")
	ahead := strings.Count(out, "stripe of a later message ahead")
	if oneway && ahead == 0 {
		t.Errorf("rank 1 read no stripe ahead of the lead frame: the one-way case was not met:\n%s", out)
	}
	t.Logf("2 ranks, first path's link down mid-loop: %v; failover (link down → the AllReduce waiting for it done): %v; %s; stripes read ahead of a lead frame: %d",
		time.Since(start).Round(time.Millisecond), failover.Round(time.Millisecond), figures,
		strings.Count(string(out), "stripe of a later message ahead"))
}

// rankPathsFirst is TestMultiPathFirstDown's rank: checked AllReduces of 8
// and 256 Ki float32 in turn; after the fourth, rank 0 creates the file
// HCOMM_TEST_MARK and the test takes eth0 (path 0, the lead's) down. The
// loop goes on until both ranks have moved off the path (each AllReduce
// also sums whether each rank has), then three more; rank 0 then asks
// for the link back (the file's name + ".up"), and the loop goes on until
// both send on the path again, then three more. With HCOMM_TEST_ONEWAY
// set, each AllReduce follows two Broadcasts from rank 0, of 8 then
// 256 Ki float32, checked, and rank 0 waits for the link to be down (the
// file's name + ".down") before the first after the mark.
func rankPathsFirst(t *testing.T, c *Comm) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const large = 256 << 10
	buf := make([]float32, large+2)
	peer := 1 - c.Rank()
	var backFrom uint64
	state := func() (moved, back bool) {
		for _, s := range tcpOf(t, c, peer).Paths() {
			if s.Path != 0 {
				continue
			}
			if !strings.Contains(s.Local+s.Remote, netnsSubnet+".") {
				t.Fatalf("rank %d: path 0 is not eth0's: %v", c.Rank(), s)
			}
			moved = s.Retired || s.Gen > 0
			if s.Gen > 0 && !s.Retired {
				if backFrom == 0 {
					backFrom = s.Sent
				}
				back = s.Sent > backFrom
			}
		}
		return moved, back
	}
	flag := func(b bool) float32 {
		if b {
			return 1
		}
		return 0
	}
	mark := os.Getenv("HCOMM_TEST_MARK")
	var times strings.Builder
	after, upAt, backAt := -1, -1, -1
	var slowest time.Duration
	oneway := os.Getenv("HCOMM_TEST_ONEWAY") != ""
	for i := 0; ; i++ {
		n := 8
		if i%2 == 1 {
			n = large
		}
		start := time.Now()
		if oneway {
			for _, m := range []int{8, large} {
				y := buf[:m]
				for j := range y {
					y[j] = 0
					if c.Rank() == 0 {
						y[j] = float32(i%7 + 1 + j%5)
					}
				}
				if err := Broadcast(ctx, c, y, 0); err != nil {
					t.Fatalf("Broadcast %d (%d elements): %v", i, m, err)
				}
				for j := range y {
					if want := float32(i%7 + 1 + j%5); y[j] != want {
						t.Fatalf("Broadcast %d (%d elements): element %d is %v, want %v", i, m, j, y[j], want)
					}
				}
			}
		}
		x := buf[:n+2]
		for j := range n {
			x[j] = float32((c.Rank()+1)*(i%7+1) + j%5)
		}
		moved, back := state()
		x[n], x[n+1] = flag(moved), flag(back)
		if err := AllReduce(ctx, c, x, x, Sum); err != nil {
			t.Fatalf("AllReduce %d (%d elements): %v", i, n, err)
		}
		end := time.Now()
		fmt.Fprintf(&times, "%d %d\n", start.UnixNano(), end.UnixNano())
		if i > 3 && upAt < 0 {
			slowest = max(slowest, end.Sub(start))
		}
		for j := range n {
			if want := float32(3*(i%7+1) + 2*(j%5)); x[j] != want {
				t.Fatalf("AllReduce %d (%d elements): element %d is %v, want %v", i, n, j, x[j], want)
			}
		}
		if i == 3 && c.Rank() == 0 {
			if err := os.WriteFile(mark, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if oneway && !waitFile(t, mark+".down") {
				// The next two Broadcasts go out with the link down:
				// the small one and the large one's header are lost.
				t.Fatal("the link did not go down")
			}
		}
		if after < 0 && x[n] == 2 {
			after = i
			t.Logf("rank %d: both ranks moved off the first path by AllReduce %d", c.Rank(), i)
		}
		if after >= 0 && upAt < 0 && i >= after+3 {
			upAt = i
			if c.Rank() == 0 {
				if err := os.WriteFile(mark+".up", nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if upAt >= 0 && backAt < 0 && x[n+1] == 2 {
			backAt = i
			t.Logf("rank %d: both ranks send on the first path again by AllReduce %d", c.Rank(), i)
		}
		if backAt >= 0 && i >= backAt+3 {
			break
		}
	}
	for _, s := range tcpOf(t, c, peer).Paths() {
		t.Logf("rank %d: %v", c.Rank(), s)
	}
	if c.Rank() == 0 {
		os.WriteFile(mark+".times", []byte(times.String()), 0o644)
		line := fmt.Sprintf("slowest AllReduce after the break %v; both moved off the path by AllReduce %d, mended after %d, both sent on it again by %d",
			slowest.Round(time.Millisecond), after, upAt, backAt)
		os.WriteFile(mark+".figures", []byte(line), 0o644)
	}
}

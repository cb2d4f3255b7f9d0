package hcomm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/transport/mux"
	"github.com/hcomm-go/hcomm/internal/transport/tcp"
)

// The multi-path tests give every namespace two links, eth0 and eth1, each
// on its own bridge and subnet (192.168.79.0/24 and 192.168.80.0/24), so
// every pair of hosts has two network paths; tc shapes them separately.

const netnsSubnet2 = "192.168.80"

// newTwoLinkCluster is newCluster with a second link per host; rates[i],
// if not empty, shapes link i's egress on every host with tbf.
func newTwoLinkCluster(t *testing.T, hosts int, rates [2]string) *cluster {
	c := newCluster(t, hosts, rates[0])
	c.addLink("eth1", "br1", netnsSubnet2, rates[1])
	return c
}

// addLink gives every host another link, dev, on a bridge of its own with
// addresses subnet.(10+i)/24, shaped to rate if not empty.
func (c *cluster) addLink(dev, bridge, subnet, rate string) {
	c.t.Helper()
	br := c.prefix + "br"
	c.ip("-n", br, "link", "add", bridge, "type", "bridge")
	c.ip("-n", br, "link", "set", bridge, "up")
	for i, ns := range c.hosts {
		q := fmt.Sprintf("%s%d", bridge, i)
		c.ip("-n", ns, "link", "add", dev, "type", "veth", "peer", "name", q, "netns", br)
		c.ip("-n", ns, "addr", "add", fmt.Sprintf("%s.%d/24", subnet, 10+i), "dev", dev)
		c.ip("-n", ns, "link", "set", dev, "up")
		c.ip("-n", br, "link", "set", q, "master", bridge)
		c.ip("-n", br, "link", "set", q, "up")
		if rate != "" {
			c.shape(ns, dev, rate)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, ns := range c.hosts {
		for time.Now().Before(deadline) {
			out, _ := exec.Command("ip", "-n", ns, "-br", "link", "show", dev).Output()
			if strings.Contains(string(out), " UP ") {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// shape sets (or replaces) a tbf qdisc on dev in namespace ns.
func (c *cluster) shape(ns, dev, rate string) {
	c.t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev,
		"root", "tbf", "rate", rate, "burst", "256kb", "latency", "20ms").CombinedOutput()
	if err != nil {
		c.t.Fatalf("tc: %v\n%s", err, out)
	}
}

// tcpOf returns the TCP transport that reaches peer p.
func tcpOf(t *testing.T, c *Comm, p int) *tcp.Transport {
	t.Helper()
	m, ok := c.path.T.(*mux.Mux)
	if !ok {
		t.Fatalf("transport %T", c.path.T)
	}
	tr, ok := m.Route(p).(*tcp.Transport)
	if !ok {
		t.Fatalf("rank %d reaches rank %d through %T", c.Rank(), p, m.Route(p))
	}
	return tr
}

// rankPaths runs every collective over two paths per pair of hosts and
// checks that both paths carried data; with HCOMM_TEST_SLOW_PATH set, that
// the path it names (eth1's subnet) ended with the smaller weight.
func rankPaths(t *testing.T, c *Comm) {
	rankMatrix[float32](t, []*Comm{c})
	rankLarge(t, c)
	var dump strings.Builder
	if err := c.WriteState(&dump); err != nil || !strings.Contains(dump.String(), "tcp peer ") {
		t.Errorf("WriteState shows no network paths (%v):\n%s", err, dump.String())
	}
	per, _ := strconv.Atoi(os.Getenv("HCOMM_TEST_PER_HOST"))
	// A few large AllReduces so the weights settle.
	buf := make([]float32, 4<<20/4)
	for range 6 {
		if err := AllReduce(context.Background(), c, buf, buf, Sum); err != nil {
			t.Fatal(err)
		}
	}
	for p := 0; p < c.Size(); p++ {
		if p/per == c.Rank()/per {
			continue
		}
		stats := tcpOf(t, c, p).Paths()
		var fast, slow *tcp.PathStats
		for i := range stats {
			s := &stats[i]
			if s.Peer != p {
				continue
			}
			t.Logf("rank %d: %v", c.Rank(), s)
			if !s.Up {
				t.Errorf("rank %d: path down: %v", c.Rank(), s)
			}
			if strings.Contains(s.Local+s.Remote, netnsSubnet2+".") {
				slow = s
			} else {
				fast = s
			}
		}
		if fast == nil || slow == nil {
			t.Fatalf("rank %d to rank %d: paths %v, want one per subnet", c.Rank(), p, stats)
		}
		if fast.Sent+slow.Sent < 4<<20 {
			continue // the planner's schedules hardly use this pair
		}
		if fast.Sent == 0 || slow.Sent == 0 || fast.Received == 0 || slow.Received == 0 {
			t.Errorf("rank %d to rank %d: a path is not used both ways: %v, %v", c.Rank(), p, fast, slow)
		}
		if os.Getenv("HCOMM_TEST_SLOW_PATH") != "" && !(slow.Rate < fast.Rate/2) {
			t.Errorf("rank %d to rank %d: the path shaped to 10%% is estimated at %.1f MB/s, the other at %.1f MB/s",
				c.Rank(), p, slow.Rate/1e6, fast.Rate/1e6)
		}
	}
}

// TestMultiPathNetns runs 2 hosts × 2 ranks, each pair of hosts joined by
// two links, with HCOMM_SOCKET_IFNAME=eth: the correctness matrix over
// both paths, equal and with eth1 shaped to a tenth of eth0.
func TestMultiPathNetns(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, tt := range []struct {
		name  string
		rates [2]string
		env   []string
	}{
		{"equal", [2]string{"", ""}, nil},
		{"tenth", [2]string{"400mbit", "40mbit"}, []string{"HCOMM_TEST_SLOW_PATH=1"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cl := newTwoLinkCluster(t, 2, tt.rates)
			const n, per = 4, 2
			rsh := nsRsh(t, t.TempDir())
			flags := []string{"-n", strconv.Itoa(n),
				"--hosts", fmt.Sprintf("%s:%d,%s:%d", cl.hosts[0], per, cl.hosts[1], per),
				"--rsh", rsh, "--store-addr", cl.addr(0) + ":0", "--tag-output", "--timeout", "4m",
				"-x", childEnv, "-x", "HCOMM_TEST_PER_HOST", "-x", "HCOMM_SOCKET_IFNAME=eth"}
			for _, kv := range tt.env {
				flags = append(flags, "-x", kv)
			}
			start := time.Now()
			out, err := launch(t, flags, []string{"ip", "netns", "exec", cl.hosts[0]}, "paths",
				append([]string{fmt.Sprintf("HCOMM_TEST_PER_HOST=%d", per)}, tt.env...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			t.Logf("4 ranks on 2 namespaces, 2 paths (%v): %v", tt.rates, time.Since(start).Round(time.Millisecond))
		})
	}
}

// rankPathsDown runs AllReduces until one fails, after rank 0 has created
// the file HCOMM_TEST_MARK (the test then takes every data link of host 1
// down): the failure must be the loss of the connections, found by the
// connections' health bound (HCOMM_TCP_DEAD) or the local link's state,
// not the collective's timeout.
func rankPathsDown(t *testing.T, c *Comm) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	buf := make([]float32, 256<<10)
	for i := 0; ; i++ {
		err := AllReduce(ctx, c, buf, buf, Sum)
		if err != nil {
			// Both ranks live: the first to find its connections dead
			// fails, and the other may hear of that (through the store,
			// on its own link) before its own connections time out. Either
			// way the cause is the lost connection, not a deadline.
			lost, aborted := errors.Is(err, ErrPeerLost), errors.Is(err, ErrAborted)
			if errors.Is(err, ErrTimeout) || !lost && !aborted || !strings.Contains(err.Error(), "connection") {
				t.Fatalf("AllReduce %d: %v (lost %v, aborted %v), want the loss of the peer's connections", i, err, lost, aborted)
			}
			t.Logf("AllReduce %d: %v (lost %v, aborted %v)", i, err, lost, aborted)
			return
		}
		if i == 5 && c.Rank() == 0 {
			if err := os.WriteFile(os.Getenv("HCOMM_TEST_MARK"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestMultiPathAllDown: 2 hosts × 1 rank over two links, the store on a
// third; both data links of one host go down in the middle of an
// AllReduce loop, and both ranks fail with ErrPeerLost within
// HCOMM_TCP_DEAD (2 s here) rather than hanging until the collective's
// deadline.
func TestMultiPathAllDown(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	cl, mark, flags := markedTwoHostJob(t, "-x", "HCOMM_TCP_DEAD=2s")
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Wait for the job to reach its loop, then cut host 1's links.
		for {
			if _, err := os.Stat(mark); err == nil {
				break
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-t.Context().Done():
				return
			}
		}
		for _, dev := range []string{"eth0", "eth1"} {
			exec.Command("ip", "-n", cl.hosts[1], "link", "set", dev, "down").Run()
		}
	}()
	out, err := launch(t, flags, []string{"ip", "netns", "exec", cl.hosts[0]}, "pathsdown",
		"HCOMM_TEST_MARK="+mark)
	<-done
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// rankPathsFail runs checked AllReduces between 2 ranks on 2 hosts; after
// the fourth, rank 0 creates the file HCOMM_TEST_MARK and the test breaks
// eth1's path (link down, or shaped to a trickle). The loop goes on,
// every result checked, until both ranks have retired the path (each
// AllReduce also sums whether each rank has), then three more.
func rankPathsFail(t *testing.T, c *Comm) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const count = 256 << 10 // 1 MiB: stripes over both paths
	// Two more elements: whether this rank saw the path retired (then or
	// earlier), and whether it sees it back in use; summed, 2 says both
	// ranks do.
	buf := make([]float32, count+2)
	peer := 1 - c.Rank()
	var backFrom uint64 // bytes sent on the path when its new generation was first seen
	state := func() (retired, back bool) {
		for _, s := range tcpOf(t, c, peer).Paths() {
			if s.Retired || s.Gen > 0 {
				if !strings.Contains(s.Local+s.Remote, netnsSubnet2+".") {
					t.Fatalf("rank %d retired the wrong path: %v", c.Rank(), s)
				}
				retired = true
			}
			if s.Gen > 0 && !s.Retired {
				if backFrom == 0 {
					backFrom = s.Sent
				}
				back = s.Sent > backFrom
			}
		}
		return retired, back
	}
	flag := func(b bool) float32 {
		if b {
			return 1
		}
		return 0
	}
	after, upAt, backAt := -1, -1, -1
	var slowest time.Duration
	var upTime, backTime time.Time
	var times []time.Duration // of the AllReduces after both retired the path, before it is back
	for i := 0; ; i++ {
		start := time.Now()
		for j := range count {
			buf[j] = float32((c.Rank()+1)*(i%7+1) + j%5)
		}
		retired, back := state()
		buf[count], buf[count+1] = flag(retired), flag(back)
		if err := AllReduce(ctx, c, buf, buf, Sum); err != nil {
			t.Fatalf("AllReduce %d: %v", i, err)
		}
		d := time.Since(start)
		if i > 3 && upAt < 0 {
			slowest = max(slowest, d)
		}
		if after >= 0 && upAt < 0 {
			times = append(times, d)
		}
		for j := range count {
			if want := float32(3*(i%7+1) + 2*(j%5)); buf[j] != want {
				t.Fatalf("AllReduce %d: element %d is %v, want %v", i, j, buf[j], want)
			}
		}
		if i == 3 && c.Rank() == 0 {
			if err := os.WriteFile(os.Getenv("HCOMM_TEST_MARK"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if after < 0 && buf[count] == 2 {
			after = i
			t.Logf("rank %d: both ranks retired the path by AllReduce %d", c.Rank(), i)
		}
		if after >= 0 && upAt < 0 && i >= after+3 {
			// The link comes back: the path is dialed again and
			// both ranks move to it.
			upAt, upTime = i, time.Now()
			if c.Rank() == 0 {
				if err := os.WriteFile(os.Getenv("HCOMM_TEST_MARK")+".up", nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		if upAt >= 0 && backAt < 0 && buf[count+1] == 2 {
			backAt, backTime = i, time.Now()
			t.Logf("rank %d: both ranks use the path again by AllReduce %d", c.Rank(), i)
		}
		if backAt >= 0 && i >= backAt+3 {
			break
		}
	}
	for _, s := range tcpOf(t, c, peer).Paths() {
		t.Logf("rank %d: %v", c.Rank(), s)
	}
	if c.Rank() == 0 {
		// For the parent's log: the AllReduce that spanned the
		// failure, and the ones on the surviving path.
		slices.Sort(times)
		line := fmt.Sprintf("slowest AllReduce after the break %v, median on the surviving path %v; "+
			"both retired the path by AllReduce %d, mended after %d, both sent on it again by %d (%v after the mend); rank 0: %v",
			slowest.Round(time.Millisecond), times[len(times)/2].Round(time.Microsecond),
			after, upAt, backAt, backTime.Sub(upTime).Round(time.Millisecond), tcpOf(t, c, peer).Paths())
		os.WriteFile(os.Getenv("HCOMM_TEST_MARK")+".figures", []byte(line), 0o644)
	}
}

// TestMultiPathFailover: 2 hosts × 1 rank over two links (the store on a
// third); in the middle of a loop of checked AllReduces, one link stops:
// host 1's eth1 goes down, or every host's eth1 is shaped to 1 kbit/s (a
// path that takes data but hardly delivers). The stripes on it go again
// on eth0, both ranks retire the path, and the loop goes on with the right
// results and no error. Then the link comes back (up again, or the
// shaping removed): the path is dialed again and both ranks send on it
// again, still with the right results.
func TestMultiPathFailover(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, tt := range []struct {
		name        string
		fault, mend func(cl *cluster) error
	}{
		{"down", func(cl *cluster) error {
			return exec.Command("ip", "-n", cl.hosts[1], "link", "set", "eth1", "down").Run()
		}, func(cl *cluster) error {
			return exec.Command("ip", "-n", cl.hosts[1], "link", "set", "eth1", "up").Run()
		}},
		{"blackhole", func(cl *cluster) error {
			for _, ns := range cl.hosts {
				out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth1",
					"root", "tbf", "rate", "1kbit", "burst", "1600", "latency", "50ms").CombinedOutput()
				if err != nil {
					return fmt.Errorf("tc: %v\n%s", err, out)
				}
			}
			return nil
		}, func(cl *cluster) error {
			for _, ns := range cl.hosts {
				out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth1", "root").CombinedOutput()
				if err != nil {
					return fmt.Errorf("tc: %v\n%s", err, out)
				}
			}
			return nil
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cl, mark, flags := markedTwoHostJob(t)
			done := make(chan error, 1)
			go func() {
				// Wait for the job to reach its loop, then break the
				// link; once both ranks retired the path, mend it.
				if !waitFile(t, mark) {
					done <- nil
					return
				}
				if err := tt.fault(cl); err != nil {
					done <- err
					return
				}
				if !waitFile(t, mark+".up") {
					done <- nil
					return
				}
				done <- tt.mend(cl)
			}()
			start := time.Now()
			out, err := launch(t, flags, []string{"ip", "netns", "exec", cl.hosts[0]}, "pathsfail",
				"HCOMM_TEST_MARK="+mark)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			figures, _ := os.ReadFile(mark + ".figures")
			t.Logf("2 ranks, one path broken mid-loop: %v; %s", time.Since(start).Round(time.Millisecond), figures)
		})
	}
}

// waitFile waits for a file to exist, and reports false if the test ended
// first.
func waitFile(t *testing.T, name string) bool {
	for {
		if _, err := os.Stat(name); err == nil {
			return true
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			return false
		}
	}
}

// markedTwoHostJob makes two namespaces joined by two data links (eth0,
// eth1) and a management link for the store, and returns them, the mark
// file the children wait for before the fault, and the `hcomm run` flags
// of a 2-rank job across them (one rank each) with extra appended.
func markedTwoHostJob(t *testing.T, extra ...string) (*cluster, string, []string) {
	cl := newTwoLinkCluster(t, 2, [2]string{"", ""})
	cl.addLink("mgmt0", "br2", "192.168.81", "")
	dir := t.TempDir()
	mark := filepath.Join(dir, "mark")
	flags := []string{"-n", "2", "--hosts", fmt.Sprintf("%s:1,%s:1", cl.hosts[0], cl.hosts[1]),
		"--rsh", nsRsh(t, dir), "--store-addr", "192.168.81.10:0", "--tag-output", "--timeout", "4m",
		"-x", childEnv, "-x", "HCOMM_SOCKET_IFNAME=eth", "-x", "HCOMM_TEST_MARK=" + mark}
	return cl, mark, append(flags, extra...)
}

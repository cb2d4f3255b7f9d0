package hcomm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	br := c.prefix + "br"
	c.ip("-n", br, "link", "add", "br1", "type", "bridge")
	c.ip("-n", br, "link", "set", "br1", "up")
	for i, ns := range c.hosts {
		q := fmt.Sprintf("q%d", i)
		c.ip("-n", ns, "link", "add", "eth1", "type", "veth", "peer", "name", q, "netns", br)
		c.ip("-n", ns, "addr", "add", fmt.Sprintf("%s.%d/24", netnsSubnet2, 10+i), "dev", "eth1")
		c.ip("-n", ns, "link", "set", "eth1", "up")
		c.ip("-n", br, "link", "set", q, "master", "br1")
		c.ip("-n", br, "link", "set", q, "up")
		if rates[1] != "" {
			c.shape(ns, "eth1", rates[1])
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, ns := range c.hosts {
		for time.Now().Before(deadline) {
			out, _ := exec.Command("ip", "-n", ns, "-br", "link", "show", "eth1").Output()
			if strings.Contains(string(out), " UP ") {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c
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
	m, ok := c.t.(*mux.Mux)
	if !ok {
		t.Fatalf("transport %T", c.t)
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
			rsh := filepath.Join(t.TempDir(), "nsrsh")
			script := "#!/bin/sh\nhost=$1; shift\nexec ip netns exec \"$host\" sh -c \"$*\"\n"
			if err := os.WriteFile(rsh, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
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

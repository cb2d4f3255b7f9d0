package hcomm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/boot"
)

// The edges of the default path choice (every up interface): an extra
// address that does not answer, and the same private address on two hosts.

// dupAddr is the address both hosts of TestMultiPathSameAddress give their
// eth2.
const dupAddr = "10.77.0.1"

// edgeJob runs mode as 2 hosts × 2 ranks over eth0 and the cluster's other
// eth links, the store on host 0's eth0, and returns the job's output.
func edgeJob(t *testing.T, cl *cluster, mode string) string {
	t.Helper()
	dir := t.TempDir()
	argv := []string{"ip", "netns", "exec", cl.hosts[0], launcher(t), "run", "-n", "4",
		"--hosts", fmt.Sprintf("%s:2,%s:2", cl.hosts[0], cl.hosts[1]),
		"--rsh", nsRsh(t, dir), "--store-addr", cl.addr(0) + ":0", "--tag-output", "--timeout", "4m",
		"-x", childEnv, "-x", "HCOMM_SOCKET_IFNAME=eth",
		"--", os.Args[0], "-test.run=^TestRankProcess$", "-test.count=1", "-test.v"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"="+mode)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, lastLines(string(out), 80))
	}
	t.Logf("4 ranks on 2 namespaces (%s): %v", mode, time.Since(start).Round(time.Millisecond))
	return string(out)
}

// countLines counts the lines of out that contain every one of words.
func countLines(out string, words ...string) int {
	n := 0
	for _, l := range strings.Split(out, "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			n++
		}
	}
	return n
}

// TestMultiPathDeadExtra: every host has eth0 and eth1, but host 1's eth1
// leads nowhere (its bridge port is down): its address is published and
// never answers. Each pair drops that path once the other answered and
// the job runs on eth0.
func TestMultiPathDeadExtra(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	cl := newTwoLinkCluster(t, 2, [2]string{"", ""})
	cl.ip("-n", cl.prefix+"br", "link", "set", "br11", "down")
	out := edgeJob(t, cl, "pathsdead")
	// Ranks 0 and 1 dial ranks 2 and 3: each gives up eth1 once eth0
	// answered, not after the probe's full timeout.
	if n := countLines(out, "path does not reach the peer; dropped", netnsSubnet2+".11", "no answer within the grace"); n != 4 {
		t.Errorf("%d log lines for the eth1 paths dropped at the grace, want 4:\n%s", n, out)
	}
}

// TestMultiPathSameAddress: every host has an eth2 with the same private
// address, dupAddr, so a rank that dials a peer's eth2 address reaches its
// own host. Rank 0 serves a stray listener there at rank 2's port (as
// another program could): the pair must drop that path, not fail.
func TestMultiPathSameAddress(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	cl := newCluster(t, 2, "")
	for _, ns := range cl.hosts {
		cl.ip("-n", ns, "link", "add", "eth2", "type", "veth", "peer", "name", "x2")
		cl.ip("-n", ns, "addr", "add", dupAddr+"/24", "dev", "eth2")
		cl.ip("-n", ns, "link", "set", "x2", "up")
		cl.ip("-n", ns, "link", "set", "eth2", "up")
	}
	out := edgeJob(t, cl, "pathsdup")
	if n := countLines(out, "path reaches another listener than the peer's; dropped", "peer=2", dupAddr); n != 1 {
		t.Errorf("%d log lines for rank 0's path to rank 2 at the stray listener, want 1:\n%s", n, out)
	}
}

// rankPathsDead checks, on 2 hosts × 2 ranks, that every collective works
// with host 1's eth1 dead, and that the ranks that dial across hosts
// dropped that path.
func rankPathsDead(t *testing.T, c *Comm) {
	connectAll(t, c)
	rankMatrix[float32](t, []*Comm{c})
	if c.Rank() >= 2 {
		return
	}
	for p := 2; p < 4; p++ {
		checkDropped(t, c, p, netnsSubnet2+".11")
	}
}

// rankPathsDup: rank 0 serves, before it first talks to rank 2 (not a
// ring neighbour, so not connected at Init), a stray listener at
// dupAddr:rank 2's port on its own host; then every collective runs.
func rankPathsDup(t *testing.T, c *Comm) {
	var accepted atomic.Int32
	if c.Rank() == 0 {
		ln, err := net.Listen("tcp", net.JoinHostPort(dupAddr, cardPort(t, c, 2, dupAddr)))
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			for {
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				accepted.Add(1)
				io.WriteString(nc, "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
				nc.Close()
			}
		}()
	}
	connectAll(t, c)
	rankMatrix[float32](t, []*Comm{c})
	if c.Rank() >= 2 {
		return
	}
	for p := 2; p < 4; p++ {
		checkDropped(t, c, p, dupAddr)
	}
	if c.Rank() == 0 && accepted.Load() == 0 {
		t.Error("rank 0 never reached the stray listener: the test did not set up what it is about")
	}
}

// connectAll makes every pair talk (an AllToAll), checking the result.
func connectAll(t *testing.T, c *Comm) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := c.Size()
	send, recv := make([]int32, n*1024), make([]int32, n*1024)
	for i := range send {
		send[i] = int32(c.Rank()*1_000_000 + i)
	}
	if err := AllToAll(ctx, c, send, recv); err != nil {
		t.Fatal(err)
	}
	for r := range n {
		for j := range 1024 {
			if want := int32(r*1_000_000 + c.Rank()*1024 + j); recv[r*1024+j] != want {
				t.Fatalf("AllToAll: element %d from rank %d is %d, want %d", j, r, recv[r*1024+j], want)
			}
		}
	}
}

// checkDropped checks that this rank's paths to peer p are eth0's, up, and
// the one to the peer's address at ip, dropped.
func checkDropped(t *testing.T, c *Comm, p int, ip string) {
	t.Helper()
	stats := tcpOf(t, c, p).Paths()
	up, dropped := 0, 0
	for _, s := range stats {
		if s.Peer != p {
			continue
		}
		if s.Up {
			up++
			if !strings.HasPrefix(s.Remote, netnsSubnet+".") {
				t.Errorf("rank %d: path up to rank %d is not eth0's: %v", c.Rank(), p, s)
			}
		} else if strings.HasPrefix(s.Remote, ip+":") {
			dropped++
		}
	}
	if up != 1 || dropped != 1 {
		t.Errorf("rank %d to rank %d: %d paths up, %d dropped at %s; want 1 and 1: %v", c.Rank(), p, up, dropped, ip, stats)
	}
}

// cardPort returns the port of peer p's listener address at ip, from its
// card in the store.
func cardPort(t *testing.T, c *Comm, p int, ip string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := c.job.Store().Get(ctx, "hcomm/world/card/"+strconv.Itoa(p))
	if err != nil {
		t.Fatal(err)
	}
	var card boot.Card
	if err := json.Unmarshal(b, &card); err != nil {
		t.Fatal(err)
	}
	for _, a := range strings.Split(card.Addr, ",") {
		if h, port, err := net.SplitHostPort(a); err == nil && h == ip {
			return port
		}
	}
	t.Fatalf("rank %d's card %q has no address at %s", p, card.Addr, ip)
	return ""
}

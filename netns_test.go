package hcomm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/transport/mux"
	"github.com/hcomm-go/hcomm/internal/transport/shm"
	"github.com/hcomm-go/hcomm/internal/transport/tcp"
)

// The multi-host tests build a small cluster of network namespaces joined
// by veth pairs through a bridge (addresses 192.168.79.0/24, which exist
// only inside those namespaces), run ranks in them and tear everything down
// afterwards, even when the test fails. They need root and iproute2; under
// CI (CI set) or with HCOMM_REQUIRE_NETNS=1 a missing prerequisite fails
// the test instead of skipping it.

const netnsSubnet = "192.168.79"

type cluster struct {
	t      *testing.T
	prefix string
	hosts  []string
}

func needNetns(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root"
	} else if _, err := exec.LookPath("ip"); err != nil {
		why = "needs iproute2 (ip)"
	}
	if why == "" {
		return
	}
	if os.Getenv("HCOMM_REQUIRE_NETNS") != "" || os.Getenv("CI") != "" {
		t.Fatalf("multi-host test %s", why)
	}
	t.Skipf("multi-host test %s", why)
}

func (c *cluster) ip(args ...string) {
	c.t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newCluster makes hosts namespaces; rate, if not empty, shapes every
// host's egress with tbf (e.g. "10gbit").
func newCluster(t *testing.T, hosts int, rate string) *cluster {
	needNetns(t)
	c := &cluster{t: t, prefix: fmt.Sprintf("hct%d", os.Getpid())}
	removeStaleNamespaces()
	t.Cleanup(c.down)
	br := c.prefix + "br"
	c.ip("netns", "add", br)
	c.ip("-n", br, "link", "set", "lo", "up")
	c.ip("-n", br, "link", "add", "br0", "type", "bridge")
	c.ip("-n", br, "link", "set", "br0", "up")
	for i := 0; i < hosts; i++ {
		ns := fmt.Sprintf("%sh%d", c.prefix, i)
		c.hosts = append(c.hosts, ns)
		c.ip("netns", "add", ns)
		c.ip("-n", ns, "link", "set", "lo", "up")
		c.ip("-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", fmt.Sprintf("p%d", i), "netns", br)
		c.ip("-n", ns, "addr", "add", c.addr(i)+"/24", "dev", "eth0")
		c.ip("-n", ns, "link", "set", "eth0", "up")
		c.ip("-n", br, "link", "set", fmt.Sprintf("p%d", i), "master", "br0")
		c.ip("-n", br, "link", "set", fmt.Sprintf("p%d", i), "up")
		if rate != "" {
			out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0",
				"root", "tbf", "rate", rate, "burst", "2mb", "latency", "5ms").CombinedOutput()
			if err != nil {
				t.Fatalf("tc: %v\n%s", err, out)
			}
		}
	}
	// Wait until every host's link is up (veth pairs come up
	// asynchronously).
	deadline := time.Now().Add(5 * time.Second)
	for _, ns := range c.hosts {
		for time.Now().Before(deadline) {
			out, _ := exec.Command("ip", "-n", ns, "-br", "link", "show", "eth0").Output()
			if strings.Contains(string(out), " UP ") {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c
}

func (c *cluster) addr(i int) string { return fmt.Sprintf("%s.%d", netnsSubnet, 10+i) }

func (c *cluster) down() {
	for _, ns := range append([]string{c.prefix + "br"}, c.hosts...) {
		exec.Command("ip", "netns", "del", ns).Run()
	}
}

// removeStaleNamespaces deletes test namespaces whose creating process
// is gone (a test binary killed before its cleanup ran).
func removeStaleNamespaces() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, "hct")
		if !ok {
			continue
		}
		end := strings.IndexAny(rest, "bh")
		if end <= 0 {
			continue
		}
		pid, err := strconv.Atoi(rest[:end])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			exec.Command("ip", "netns", "del", name).Run()
		}
	}
}

// rankHosts checks that this rank reaches the ranks of its own namespace
// (HCOMM_TEST_PER_HOST ranks per namespace) through shared memory and the
// others through TCP.
func rankHosts(t *testing.T, c *Comm) {
	per, _ := strconv.Atoi(os.Getenv("HCOMM_TEST_PER_HOST"))
	m, ok := c.path.T.(*mux.Mux)
	if !ok || per == 0 {
		t.Fatalf("transport %T, per host %d", c.path.T, per)
	}
	for p := 0; p < c.Size(); p++ {
		if p == c.Rank() {
			continue
		}
		switch rt := m.Route(p); {
		case p/per == c.Rank()/per:
			if _, ok := rt.(*shm.Transport); !ok {
				t.Errorf("rank %d reaches rank %d (same host) through %T, want shm", c.Rank(), p, rt)
			}
		default:
			if _, ok := rt.(*tcp.Transport); !ok {
				t.Errorf("rank %d reaches rank %d (other host) through %T, want tcp", c.Rank(), p, rt)
			}
		}
	}
}

func TestMultiHost(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	for _, rate := range []string{"", "10gbit"} {
		t.Run("rate="+rate, func(t *testing.T) {
			cl := newCluster(t, 2, rate)
			const n, per = 4, 2
			rsh := nsRsh(t, t.TempDir())
			start := time.Now()
			// The launcher runs on host 0 and serves the store there;
			// every rank, host 0's too, is started through the rsh.
			out, err := launch(t, []string{"-n", strconv.Itoa(n),
				"--hosts", fmt.Sprintf("%s:%d,%s:%d", cl.hosts[0], per, cl.hosts[1], per),
				"--rsh", rsh, "--store-addr", cl.addr(0) + ":0", "--tag-output", "--timeout", "4m",
				"-x", childEnv, "-x", "HCOMM_TEST_PER_HOST"},
				[]string{"ip", "netns", "exec", cl.hosts[0]}, "hosts", fmt.Sprintf("HCOMM_TEST_PER_HOST=%d", per))
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			t.Logf("4 ranks on 2 namespaces (rate %q): %v", rate, time.Since(start).Round(time.Millisecond))
		})
	}
}

// nsRsh writes into dir the remote-shell script hcomm run uses to start a
// rank "on host" h: it runs the command in network namespace h.
func nsRsh(t *testing.T, dir string) string {
	t.Helper()
	rsh := filepath.Join(dir, "nsrsh")
	script := "#!/bin/sh\nhost=$1; shift\nexec ip netns exec \"$host\" sh -c \"$*\"\n"
	if err := os.WriteFile(rsh, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return rsh
}

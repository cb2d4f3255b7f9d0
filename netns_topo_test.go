package hcomm

import (
	"context"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/topo"
	"github.com/hcomm-go/hcomm/internal/transport/mux"
	"github.com/hcomm-go/hcomm/internal/transport/shm"
)

// rankTopology checks, in a job placed round-robin on two namespaces
// (ranks 0 and 2 on one, 1 and 3 on the other), that ranks of one
// namespace share memory and that the planner uses the layout: unless
// HCOMM_ALGO forces something, a large AllGather is hierarchical.
func rankTopology(t *testing.T, c *Comm) {
	m, ok := c.path.T.(*mux.Mux)
	if !ok {
		t.Fatalf("transport %T", c.path.T)
	}
	for p := 0; p < c.Size(); p++ {
		if _, isShm := m.Route(p).(*shm.Transport); p != c.Rank() && isShm != (p%2 == c.Rank()%2) {
			t.Errorf("rank %d reaches rank %d through %T", c.Rank(), p, m.Route(p))
		}
	}
	// An AllGather, not an AllReduce: on this placement the flat
	// halving-doubling's first round stays inside each host, so it costs
	// what the hierarchical AllReduce costs and either may win.
	a, err := c.path.Pl.Choose(sched.Uniform(sched.AllGather, c.Size(), 4<<20, 0, false), 4)
	if err != nil {
		t.Fatal(err)
	}
	want := os.Getenv("HCOMM_TEST_WANT_ALGO")
	if a.Name != want {
		t.Errorf("64 MiB AllGather uses %s, want %s", a.Name, want)
	}
	if want != "hier" || os.Getenv("HCOMM_ALGO") != "" {
		return
	}
	// The two namespaces share this machine's kernel: the planner knows
	// how many ranks each CPU carries and, with more ranks than CPUs,
	// sends small calls through one leader per host instead of on every
	// rail at once.
	crowd := c.path.Pl.Crowd()
	small := []struct {
		s    sched.Spec
		want string
	}{{sched.Uniform(sched.AllReduce, c.Size(), 2, 0, false), "rail"}, {sched.Spec{Coll: sched.Barrier, N: c.Size()}, "rail"}}
	if crowd > 1 {
		small[0].want, small[1].want = "leader", "hier"
	}
	// Crowd counts the CPUs the ranks' affinity masks allow, at least
	// those this rank may run on.
	if cpus := float64(runtime.NumCPU()); crowd <= 0 || crowd > float64(c.Size())/cpus {
		t.Errorf("crowd %v with %d ranks on one machine of %v CPUs", crowd, c.Size(), cpus)
	}
	for _, tt := range small {
		if a, err := c.path.Pl.Choose(tt.s, 4); err != nil || a.Name != tt.want {
			t.Errorf("crowd %v: %s of 8 B uses %s (%v), want %s", crowd, tt.s.Coll, a.Name, err, tt.want)
		}
	}
	// Split communicators get the layout of their ranks: ranks 0 and 2
	// share a host, 0 and 1 do not.
	ctx := context.Background()
	for _, tt := range []struct{ color, hosts int }{{c.Rank() % 2, 1}, {c.Rank() / 2, 2}} {
		sub, err := c.Split(ctx, tt.color, c.Rank())
		if err != nil {
			t.Fatal(err)
		}
		l, ok := sub.path.Pl.Layout()
		if !ok || len(l.Hosts) != tt.hosts {
			t.Errorf("split by %d: layout %v (%v), want %d hosts", tt.color, l.Hosts, ok, tt.hosts)
		}
		if shared := sub.model.Beta == plan.MemoryModel.Beta; shared != (tt.hosts == 1) {
			t.Errorf("split on %d hosts: costed with the memory model: %v", tt.hosts, shared)
		}
		v := []int64{int64(c.Rank()), 1}
		if err := AllReduce(ctx, sub, v, v, Sum); err != nil {
			t.Fatal(err)
		}
		if v[1] != 2 {
			t.Errorf("split AllReduce counted %d ranks", v[1])
		}
		sub.Close()
	}
}

// TestMultiHostTopology runs 4 ranks placed round-robin on 2 network
// namespaces (hcomm run --map-by node, or --rank-table): the correctness
// matrix under the topology-aware planner and with the layout algorithms
// forced, with HCOMM_TOPOLOGY=off, and a rank table that contradicts the
// placement, which must fail every rank at Init.
func TestMultiHostTopology(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("child")
	}
	cl := newCluster(t, 2, "")
	dir := t.TempDir()
	rsh := nsRsh(t, dir)
	table := filepath.Join(dir, "consecutive.topo")
	if err := os.WriteFile(table, []byte("host a ranks 0-1\nhost b ranks 2-3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h0, h1 := cl.hosts[0], cl.hosts[1]
	common := []string{"--rsh", rsh, "--store-addr", cl.addr(0) + ":0", "--tag-output", "--timeout", "4m",
		"-x", childEnv}
	flags := append([]string{"--hosts", fmt.Sprintf("%s:2,%s:2", h0, h1), "--map-by", "node"}, common...)
	with := func(env []string) []string {
		f := append([]string{}, flags...)
		for _, kv := range env {
			f = append(f, "-x", kv)
		}
		return f
	}
	prefix := []string{"ip", "netns", "exec", h0}
	for _, tt := range []struct {
		name string
		env  []string
	}{
		{"auto", []string{"HCOMM_TEST_WANT_ALGO=hier"}},
		{"forced hring", []string{"HCOMM_ALGO=hring", "HCOMM_TEST_WANT_ALGO=hring"}},
		{"forced hier", []string{"HCOMM_ALGO=hier", "HCOMM_TEST_WANT_ALGO=hier"}},
		{"forced rail", []string{"HCOMM_ALGO=rail", "HCOMM_TEST_WANT_ALGO=hier"}},
		{"off", []string{"HCOMM_TOPOLOGY=off", "HCOMM_TEST_WANT_ALGO=rd"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			if out, err := launch(t, with(tt.env), prefix, "topo", tt.env...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			t.Logf("%v", time.Since(start).Round(time.Millisecond))
		})
	}
	t.Run("placed by a rank table", func(t *testing.T) {
		placed := filepath.Join(dir, "interleaved.json")
		rt := fmt.Sprintf(`{"version": "1.0", "server_count": "2", "server_list": [
			{"server_id": %q, "device": [{"device_id": "0", "rank_id": "0"}, {"device_id": "1", "rank_id": "2"}]},
			{"server_id": %q, "device": [{"device_id": "0", "rank_id": "1"}, {"device_id": "1", "rank_id": "3"}]}]}`, h0, h1)
		if err := os.WriteFile(placed, []byte(rt), 0o644); err != nil {
			t.Fatal(err)
		}
		f := append([]string{"--rank-table", placed, "-x", "HCOMM_TEST_WANT_ALGO=hier"}, common...)
		if out, err := launch(t, f, prefix, "topo", "HCOMM_TEST_WANT_ALGO=hier"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	})
	// Ranks started through the rsh bind themselves (HCOMM_BIND_TO): the
	// launcher no longer binds the rsh command, so every thread on the
	// rank's CPUs shows that the rank did it.
	for _, policy := range []string{"core", "numa"} {
		t.Run("bind-to "+policy+" through rsh", func(t *testing.T) {
			allowed, err := topo.AllowedCPUs()
			if err != nil {
				t.Fatal(err)
			}
			env := []string{"HCOMM_TEST_ALLOWED=" + topo.FormatCPUList(allowed), "HCOMM_TEST_BIND=" + policy}
			f := append(with(env), "--bind-to", policy)
			if out, err := launch(t, f, prefix, "bound", env...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
	// Unbound by default, the ranks of the two namespaces of this machine
	// take their shares of its CPUs at Init, the hosts' leaders apart;
	// --bind-to none leaves them all on the launcher's CPUs.
	for _, policy := range []string{"auto", "none"} {
		t.Run("default binding where hosts share a machine/"+policy, func(t *testing.T) {
			allowed, err := topo.AllowedCPUs()
			if err != nil {
				t.Fatal(err)
			}
			env := []string{"HCOMM_TEST_ALLOWED=" + topo.FormatCPUList(allowed), "HCOMM_TEST_BIND=" + policy}
			f := with(env)
			if policy != "auto" {
				f = append(f, "--bind-to", policy)
			}
			if out, err := launch(t, f, prefix, "spread", env...); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
		})
	}
	// Namespaces of one machine are hosts of their own unless their ranks
	// share one HCOMM_HOSTNAME: then they are one host and use shared
	// memory (the file store needs no network; a TCP route between the
	// namespaces' loopbacks would fail the job).
	t.Run("one host name across namespaces", func(t *testing.T) {
		store := t.TempDir()
		out, err := spawnRanksWith(t, 4, "onehost", func(r int) []string {
			return []string{"ip", "netns", "exec", cl.hosts[r%2]}
		}, nil, "HCOMM_STORE=file://"+filepath.ToSlash(store), "HCOMM_TOKEN=x", "HCOMM_HOSTNAME=one",
			"HCOMM_CONNECT_TIMEOUT=30s")
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
	})
	t.Run("contradicting rank table", func(t *testing.T) {
		env := []string{"HCOMM_RANK_TABLE=" + table, "HCOMM_TEST_WANT_ALGO=hier"}
		out, err := launch(t, with(env), prefix, "topo", env...)
		if err == nil {
			t.Fatalf("the job passed:\n%s", out)
		}
		if want := "run on one host"; !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	})
}

// rankOneHost checks that every peer is reached through shared memory
// and that a collective works.
func rankOneHost(t *testing.T, c *Comm) {
	m, ok := c.path.T.(*mux.Mux)
	if !ok {
		t.Fatalf("transport %T", c.path.T)
	}
	for p := 0; p < c.Size(); p++ {
		if _, isShm := m.Route(p).(*shm.Transport); p != c.Rank() && !isShm {
			t.Errorf("rank %d reaches rank %d through %T, want shared memory", c.Rank(), p, m.Route(p))
		}
	}
	v := []int64{1}
	if err := AllReduce(context.Background(), c, v, v, Sum); err != nil || v[0] != int64(c.Size()) {
		t.Fatalf("AllReduce: %v, %d", err, v[0])
	}
}

// rankSpread checks where the ranks of a job on two namespaces of this
// machine run after Init under hcomm run --bind-to $HCOMM_TEST_BIND
// (auto or none), out of the launcher's CPUs $HCOMM_TEST_ALLOWED: under
// none every thread on all of them; under auto every rank on its share —
// disjoint shares while the CPUs suffice, one CPU each, spread evenly,
// when the ranks outnumber them — every thread of the rank on it, and the
// hosts' leaders (the first ranks of the planner's layout) on different
// CPUs.
func rankSpread(t *testing.T, c *Comm) {
	allowed, err := topo.ParseCPUList(os.Getenv("HCOMM_TEST_ALLOWED"))
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 || allowed[len(allowed)-1] >= 64 {
		t.Skipf("launcher's CPUs %s: want 2 to 64", topo.FormatCPUList(allowed))
	}
	mine, err := topo.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	var bits int64
	for _, cpu := range mine {
		bits |= 1 << cpu
	}
	masks := make([]int64, c.Size())
	if err := AllGather(context.Background(), c, []int64{bits}, masks); err != nil {
		t.Fatal(err)
	}
	want := mine
	if os.Getenv("HCOMM_TEST_BIND") == topo.BindNone {
		want = allowed
		if !slices.Equal(mine, allowed) {
			t.Errorf("rank %d on CPUs %s under --bind-to none, want %s", c.Rank(), topo.FormatCPUList(mine), topo.FormatCPUList(allowed))
		}
	} else {
		n, ranks := len(allowed), c.Size()
		uses := map[int]int{}
		for r, m := range masks {
			cpus := 0
			for _, cpu := range allowed {
				if m&(1<<cpu) != 0 {
					uses[cpu]++
					cpus++
				}
			}
			if cpus != bits64(m) {
				t.Errorf("rank %d on CPUs %b, outside the launcher's %s", r, m, topo.FormatCPUList(allowed))
			}
			if lo := max(1, n/ranks); cpus < lo || cpus > max(1, (n+ranks-1)/ranks) {
				t.Errorf("rank %d on %d CPUs (%b), want its share of %d CPUs among %d ranks", r, cpus, m, n, ranks)
			}
		}
		for _, cpu := range allowed {
			if u := uses[cpu]; u < ranks/n || u > max(1, (ranks+n-1)/n) {
				t.Errorf("CPU %d runs %d ranks (masks %b), want %d ranks spread over %d CPUs", cpu, u, masks, ranks, n)
			}
		}
		l, ok := c.path.Pl.Layout()
		if !ok {
			t.Fatal("no layout")
		}
		for i, a := range l.Hosts {
			for _, b := range l.Hosts[i+1:] {
				if masks[a[0]]&masks[b[0]] != 0 {
					t.Errorf("leaders %d and %d share CPUs (masks %b, layout %v)", a[0], b[0], masks, l.Hosts)
				}
			}
		}
		if os.Getenv("GOMAXPROCS") == "" && runtime.GOMAXPROCS(0) > len(mine) {
			t.Errorf("rank %d bound to CPUs %s runs GOMAXPROCS %d", c.Rank(), topo.FormatCPUList(mine), runtime.GOMAXPROCS(0))
		}
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != topo.FormatCPUList(want) {
				t.Errorf("rank %d: thread %s on CPUs %s, want %s", c.Rank(), task.Name(), strings.TrimSpace(v), topo.FormatCPUList(want))
			}
		}
	}
}

// bits64 counts the bits set in m.
func bits64(m int64) int { return bits.OnesCount64(uint64(m)) }

// rankBound checks that every thread of this rank runs on the CPUs
// hcomm run --bind-to $HCOMM_TEST_BIND gives its local rank, out of the
// launcher's CPUs $HCOMM_TEST_ALLOWED, and that a collective works.
func rankBound(t *testing.T, c *Comm) {
	allowed, err := topo.ParseCPUList(os.Getenv("HCOMM_TEST_ALLOWED"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := topo.Probe(topo.System())
	if err != nil {
		t.Fatal(err)
	}
	lr, _ := strconv.Atoi(os.Getenv("HCOMM_LOCAL_RANK"))
	ls, _ := strconv.Atoi(os.Getenv("HCOMM_LOCAL_SIZE"))
	want, err := topo.Bind(os.Getenv("HCOMM_TEST_BIND"), m, allowed, lr, ls)
	if err != nil {
		t.Fatal(err)
	}
	v := []int64{1}
	if err := AllReduce(context.Background(), c, v, v, Sum); err != nil || v[0] != int64(c.Size()) {
		t.Fatalf("AllReduce: %v, %d", err, v[0])
	}
	// Bound one to a CPU, the hosts' first ranks (the leaders of the
	// leader forms) run on different CPUs while there are CPUs enough: on
	// one CPU their network-stack work would take turns.
	if os.Getenv("HCOMM_TEST_BIND") == topo.BindCore && len(want) == 1 {
		cpus := make([]int64, c.Size())
		if err := AllGather(context.Background(), c, []int64{int64(want[0])}, cpus); err != nil {
			t.Fatal(err)
		}
		if l, ok := c.path.Pl.Layout(); ok && len(l.Hosts) <= len(allowed) {
			seen := map[int64]int{}
			for _, rs := range l.Hosts {
				if r, dup := seen[cpus[rs[0]]]; dup {
					t.Errorf("leaders %d and %d both on CPU %d (layout %v, CPUs %v)", r, rs[0], cpus[rs[0]], l.Hosts, cpus)
				}
				seen[cpus[rs[0]]] = rs[0]
			}
		}
	}
	// GOMAXPROCS follows the binding (the launcher sets no GOMAXPROCS for
	// ranks it starts through --rsh).
	if os.Getenv("GOMAXPROCS") == "" && len(want) > 0 && runtime.GOMAXPROCS(0) > len(want) {
		t.Errorf("rank %d bound to CPUs %s runs GOMAXPROCS %d", c.Rank(), topo.FormatCPUList(want), runtime.GOMAXPROCS(0))
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", task.Name(), "status"))
		if err != nil {
			continue // the thread ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok && strings.TrimSpace(v) != topo.FormatCPUList(want) {
				t.Errorf("rank %d (local %d of %d): thread %s on CPUs %s, want %s", c.Rank(), lr, ls, task.Name(), strings.TrimSpace(v), topo.FormatCPUList(want))
			}
		}
	}
}

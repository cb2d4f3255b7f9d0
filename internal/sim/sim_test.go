package sim

import (
	"cmp"
	"errors"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/exec"
	"github.com/hcomm-go/hcomm/internal/sched"
)

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b)) }

func lookup(t *testing.T, c sched.Coll, name string) algo.Algorithm {
	t.Helper()
	a, ok := algo.Lookup(c, name)
	if !ok {
		t.Fatalf("no %s %s", c, name)
	}
	return a
}

// flat is one host of n ranks with a core each, no memory limit and no
// reduction cost: only α and β count.
func flat(alpha, beta float64) Topology {
	t := Default()
	t.RanksPerHost, t.HostsPerRack, t.Cores = 1<<20, 0, 0
	t.SHM = Link{Alpha: alpha, Beta: beta}
	t.MemBW, t.Gamma, t.CopyBeta = 1e18, 0, 0
	return t
}

// TestRingClosedForm checks ring AllReduce against its α–β closed form
// where nothing contends: 2(n−1)·(α + m/n·β).
func TestRingClosedForm(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8} {
		topo := flat(5e-6, 1e-9)
		topo.Cores = n
		const bytes = 1 << 20 // blocks of a chunk or less
		r, err := Simulate(topo, lookup(t, sched.AllReduce, "ring"), sched.AllReduce, n, bytes, Options{})
		if err != nil {
			t.Fatal(err)
		}
		blocks := float64(bytes) / float64(n)
		want := 2 * float64(n-1) * (5e-6 + blocks*1e-9)
		if n == 3 { // unequal blocks: the critical path takes the larger ones
			want = 2 * float64(n-1) * (5e-6 + math.Ceil(float64(bytes/4)/3)*4*1e-9)
		}
		if tol := map[bool]float64{true: 1e-4, false: 1e-6}[n == 3]; !near(r.Time, want, tol) {
			t.Errorf("n=%d: time %g, want %g", n, r.Time, want)
		}
		if !near(r.Critical.Total(), r.Time, 1e-9) {
			t.Errorf("n=%d: critical path adds up to %g, time %g", n, r.Critical.Total(), r.Time)
		}
		if got := r.Critical.Msgs[ClassSHM]; got != int64(2*(n-1)) {
			t.Errorf("n=%d: %d chunks on the critical path, want %d", n, got, 2*(n-1))
		}
	}
}

// TestContention checks that flows crossing one resource share it: a
// linear gather to a root on another host receives through one NIC.
func TestContention(t *testing.T) {
	topo := Default()
	topo.RanksPerHost, topo.HostsPerRack = 1, 0
	topo.Net = Link{Alpha: 1e-6, Beta: 1e-12} // the NIC is the bottleneck
	topo.NICBW = 1e9
	const per = 1 << 20
	for _, n := range []int{2, 3, 5} {
		r, err := Simulate(topo, lookup(t, sched.Gather, "linear"), sched.Gather, n, int64(per*n), Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := 1e-6 + float64((n-1)*per)/1e9 // the last flow waits for the others
		if !near(r.Time, want, 1e-3) {
			t.Errorf("n=%d: time %g, want %g (flows serialised on the root's NIC)", n, r.Time, want)
		}
	}
}

// TestQuotient checks that simulating one period of ranks gives exactly
// what simulating all of them gives.
func TestQuotient(t *testing.T) {
	topo := Default()
	topo.RanksPerHost, topo.HostsPerRack = 4, 2
	cases := []struct {
		coll  sched.Coll
		name  string
		n     int
		bytes int64
	}{
		{sched.AllReduce, "ring", 64, 1 << 20},
		{sched.AllReduce, "ring", 64, 40 << 20},
		{sched.AllReduce, "rd", 64, 1 << 16},
		{sched.AllReduce, "hd", 32, 1 << 20},
		{sched.AllReduce, "dbtree", 32, 1 << 20},
		{sched.AllGather, "ring", 64, 1 << 20},
		{sched.AllGather, "bruck", 32, 1 << 16},
		{sched.ReduceScatter, "ring", 32, 1 << 20},
		{sched.ReduceScatter, "rh", 32, 1 << 20},
		{sched.AllToAll, "pairwise", 32, 1 << 16},
		{sched.AllToAll, "linear", 16, 1 << 16},
		{sched.Barrier, "dissemination", 64, 0},
	}
	for _, c := range cases {
		a := lookup(t, c.coll, c.name)
		q, err := Simulate(topo, a, c.coll, c.n, c.bytes, Options{})
		if err != nil {
			t.Fatalf("%s %s: %v", c.coll, c.name, err)
		}
		f, err := Simulate(topo, a, c.coll, c.n, c.bytes, Options{NoQuotient: true})
		if err != nil {
			t.Fatalf("%s %s: %v", c.coll, c.name, err)
		}
		if f.Simulated != c.n {
			t.Errorf("%s %s: NoQuotient simulated %d ranks", c.coll, c.name, f.Simulated)
		}
		if !near(q.Time, f.Time, 1e-9) {
			t.Errorf("%s %s n=%d: %d of %d ranks (period %d) give %g, all give %g", c.coll, c.name, c.n, q.Simulated, c.n, q.Period, q.Time, f.Time)
		}
	}
	r, _ := Simulate(topo, lookup(t, sched.AllReduce, "ring"), sched.AllReduce, 64, 1<<20, Options{})
	if r.Period != 1 || r.Simulated != 8 {
		t.Errorf("ring on 64 ranks: period %d, %d simulated; want 1 and 8 (one rack)", r.Period, r.Simulated)
	}
}

// TestPieces checks the cost of simulating long messages in pieces: a
// pipelined chain's time moves by a few per cent.
func TestPieces(t *testing.T) {
	topo := Default()
	a := lookup(t, sched.Broadcast, "chain")
	exact, err := Simulate(topo, a, sched.Broadcast, 24, 256<<20, Options{MaxPieces: -1})
	if err != nil {
		t.Fatal(err)
	}
	coarse, err := Simulate(topo, a, sched.Broadcast, 24, 256<<20, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if exact.Chunks != coarse.Chunks {
		t.Errorf("chunks: exact %d, in pieces %d", exact.Chunks, coarse.Chunks)
	}
	if !near(exact.Time, coarse.Time, 0.05) {
		t.Errorf("chain broadcast: exact %g s, in 64 pieces %g s", exact.Time, coarse.Time)
	}
	// Forwarding reductions (dbtree's recv-reduce-send) reduce a chunk,
	// send it, then receive the next: in pieces too, their chunks leave a
	// reduction apart (without that, 64 pieces were 21% faster than
	// every chunk on 256 ranks).
	a = lookup(t, sched.AllReduce, "dbtree")
	for _, pieces := range []int{8, 64} {
		exact, err := Simulate(topo, a, sched.AllReduce, 32, 256<<20, Options{MaxPieces: -1})
		if err != nil {
			t.Fatal(err)
		}
		coarse, err := Simulate(topo, a, sched.AllReduce, 32, 256<<20, Options{MaxPieces: pieces})
		if err != nil {
			t.Fatal(err)
		}
		if !near(exact.Time, coarse.Time, 0.05) {
			t.Errorf("dbtree: exact %g s, in %d pieces %g s", exact.Time, pieces, coarse.Time)
		}
	}
}

// TestEveryAlgorithm runs every algorithm on small and odd rank counts over
// several hosts and racks: no deadlock, a positive time, a critical path
// adding up to it.
func TestEveryAlgorithm(t *testing.T) {
	topo := Default()
	topo.RanksPerHost, topo.HostsPerRack = 2, 2
	for _, a := range algo.All() {
		for _, n := range []int{1, 2, 3, 5, 8, 13} {
			for _, bytes := range []int64{1, 3000, 5 << 20} {
				r, err := Simulate(topo, a, a.Coll, n, bytes, Options{MaxPieces: 2})
				if err != nil {
					t.Fatalf("%s %s n=%d %d: %v", a.Coll, a.Name, n, bytes, err)
				}
				if n > 1 && !(r.Time > 0) {
					t.Errorf("%s %s n=%d %d: time %g", a.Coll, a.Name, n, bytes, r.Time)
				}
				if !near(r.Critical.Total(), r.Time, 1e-9) {
					t.Errorf("%s %s n=%d %d: critical path %g, time %g", a.Coll, a.Name, n, bytes, r.Critical.Total(), r.Time)
				}
			}
		}
	}
}

func TestErrors(t *testing.T) {
	ring := lookup(t, sched.AllReduce, "ring")
	if _, err := Simulate(Default(), ring, sched.AllGather, 4, 8, Options{}); err == nil {
		t.Error("ring AllReduce accepted for AllGather")
	}
	if _, err := Simulate(Default(), ring, sched.AllReduce, 0, 8, Options{}); err == nil {
		t.Error("0 ranks accepted")
	}
	if _, err := Simulate(Default(), ring, sched.AllReduce, 4, 1<<40, Options{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("1 TiB: %v, want ErrTooLarge", err)
	}
	if _, err := Simulate(Default(), lookup(t, sched.AllToAll, "pairwise"), sched.AllToAll, 8192, 8, Options{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("AllToAll on 8192 ranks: %v, want ErrTooLarge", err)
	}
	bad := Default()
	bad.NICBW = 0
	if _, err := Simulate(bad, ring, sched.AllReduce, 4, 8, Options{}); err == nil {
		t.Error("zero NIC bandwidth accepted")
	}
}

func TestRead(t *testing.T) {
	for _, c := range []struct {
		in, err string
	}{
		{`{"ranks_per_host": 4, "net": {"alpha": 5e-6, "beta": 1e-10}}`, ""},
		{`{}`, ""},
		{`{"ranks_per_hosts": 4}`, "unknown field"},
		{`{"ranks_per_host": 0}`, "ranks_per_host"},
		{`{"ranks_per_host": -1}`, "ranks_per_host"},
		{`{"nic_bw": -5}`, "nic_bw"},
		{`{"shm": {"alpha": -1}}`, "shm"},
		{`{"gamma": 2}`, "gamma"},
		{`{"shm_switch": -1e-6}`, "shm_switch"},
		{`{"shm_core_share": 1.5}`, "shm_core_share"},
		{`[1,2]`, "cannot unmarshal"},
		{`{"ranks_per_host": 4`, "unexpected EOF"},
	} {
		topo, err := Read(strings.NewReader(c.in))
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s: %v", c.in, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want one mentioning %q", c.in, err, c.err)
		}
		if c.err == "" && c.in != `{}` && (topo.RanksPerHost != 4 || topo.Net.Alpha != 5e-6 || topo.NICBW != Default().NICBW) {
			t.Errorf("%s: read %+v", c.in, topo)
		}
	}
	if _, err := Load("/nonexistent/topo.json"); err == nil {
		t.Error("missing file accepted")
	}
	for _, p := range []string{"default", "local"} {
		topo, err := Load(p)
		if err != nil || topo.Check() != nil {
			t.Errorf("preset %s: %v", p, err)
		}
	}
}

func FuzzRead(f *testing.F) {
	f.Add(`{"ranks_per_host": 4, "net": {"alpha": 5e-6, "beta": 1e-10}}`)
	f.Add(`{"nic_bw": 1e300, "cores": 3}`)
	f.Add(`{"ranks_per_host": 1, "hosts_per_machine": 4, "cores": 1, "net_cpu": 1e-5, "net_wake": 3e-6}`)
	f.Fuzz(func(t *testing.T, s string) {
		topo, err := Read(strings.NewReader(s))
		if err != nil {
			return
		}
		if err := topo.Check(); err != nil {
			t.Fatalf("Read returned an invalid topology: %v", err)
		}
		if _, err := Simulate(topo, lookup(t, sched.AllReduce, "ring"), sched.AllReduce, 5, 4096, Options{}); err != nil {
			t.Fatalf("valid topology %+v: %v", topo, err)
		}
	})
}

// TestHostAware simulates the host-aware algorithms of a layout beside the
// flat ones: on 8 hosts of 8 ranks the hierarchical AllReduce crosses the
// network less and wins at 1 MiB.
func TestHostAware(t *testing.T) {
	topo := Default()
	as := topo.Algorithms(sched.AllReduce, 64)
	byName := map[string]Result{}
	for _, a := range as {
		r, err := Simulate(topo, a, sched.AllReduce, 64, 1<<20, Options{})
		if err != nil {
			t.Fatalf("%s: %v", a.Name, err)
		}
		byName[a.Name] = r
	}
	for _, name := range []string{"ring", "rd", "hd", "dbtree", "hring", "hier"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("%s not simulated", name)
		}
	}
	if h, r := byName["hier"].Time, byName["ring"].Time; !(h < r) {
		t.Errorf("hier %g s, ring %g s: want hier faster", h, r)
	}
	if len(topo.Algorithms(sched.AllReduce, 8)) != len(algo.For(sched.AllReduce)) {
		t.Error("host-aware algorithms offered on one host")
	}
	l := topo.Layout(20)
	if len(l.Hosts) != 3 || len(l.Hosts[2]) != 4 || l.Check(20) != nil {
		t.Errorf("layout of 20 ranks: %v", l.Hosts)
	}
}

// TestTopologyFile reads internal/topo's files: a regular placement
// becomes hosts and racks (one period simulated), a round-robin one a
// table (every rank simulated), both agreeing with the same cluster
// described by hand.
func TestTopologyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	regular := write("regular.topo", "link intra 200\nlink inter 100\nhost a slots 4 group r0\nhost b slots 4 group r0\nhost c slots 4 group r1\nhost d slots 4 group r1\n")
	rr := write("rr.topo", "link intra 200\nlink inter 100\nhost a ranks 0,4,8,12 group r0\nhost b ranks 1,5,9,13 group r0\nhost c ranks 2,6,10,14 group r1\nhost d ranks 3,7,11,15 group r1\n")
	reg, err := Load(regular)
	if err != nil {
		t.Fatal(err)
	}
	if reg.RanksPerHost != 4 || reg.HostsPerRack != 2 || reg.Ranks != 16 || reg.hostOf != nil || !near(reg.NICBW, 12.5e9, 1e-12) || !near(reg.SHM.Beta, 1/25e9, 1e-12) {
		t.Fatalf("regular file: %+v", reg)
	}
	hand := Default()
	hand.RanksPerHost, hand.HostsPerRack = 4, 2
	hand.SHM.Beta, hand.Net.Beta, hand.Rack.Beta, hand.NICBW = 1/25e9, 1/12.5e9, 1/12.5e9, 12.5e9
	ring := lookup(t, sched.AllReduce, "ring")
	a, err := Simulate(reg, ring, sched.AllReduce, 16, 4<<20, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Simulate(hand, ring, sched.AllReduce, 16, 4<<20, Options{})
	if a.Time != b.Time {
		t.Errorf("file %g s, by hand %g s", a.Time, b.Time)
	}
	round, err := Load(rr)
	if err != nil {
		t.Fatal(err)
	}
	if round.hostOf == nil || round.Ranks != 16 || round.Hosts(16) != 4 {
		t.Fatalf("round-robin file: %+v", round)
	}
	c, err := Simulate(round, ring, sched.AllReduce, 16, 4<<20, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Round-robin, every ring edge crosses hosts: slower than the
	// regular placement, where 3 of 4 stay inside one.
	if c.Simulated != 16 || !(c.Time > a.Time) || c.Critical.Msgs[ClassSHM] != 0 {
		t.Errorf("round-robin: %d simulated, %g s (regular %g s), critical %v", c.Simulated, c.Time, a.Time, c.Critical.Msgs)
	}
	// The host-aware ring follows the file's hosts and wins back.
	var hring algo.Algorithm
	for _, x := range round.Algorithms(sched.AllReduce, 16) {
		if x.Name == "hring" {
			hring = x
		}
	}
	if hring.Build == nil {
		t.Fatal("no hring for the file's layout")
	}
	d, err := Simulate(round, hring, sched.AllReduce, 16, 4<<20, Options{})
	if err != nil || !(d.Time < c.Time) {
		t.Errorf("hring on round-robin: %g s (ring %g s), %v", d.Time, c.Time, err)
	}
	if _, err := Simulate(round, ring, sched.AllReduce, 8, 1024, Options{}); err == nil {
		t.Error("8 ranks on a 16-rank round-robin file accepted")
	}
	bad := write("bad.topo", "host a ranks 0,1\nhost b ranks 1,2\n")
	if _, err := Load(bad); err == nil {
		t.Error("rank placed twice accepted")
	}
	if _, err := Load(write("junk.json", `{"foo": 1}`)); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("junk JSON: %v", err)
	}
}

// TestTrace checks the step timeline: every step of every rank once, in
// order per rank, the last ending at the collective's time.
func TestTrace(t *testing.T) {
	topo := Default()
	a := lookup(t, sched.AllReduce, "hd")
	const n = 12
	steps := map[int][]TraceStep{}
	r, err := Simulate(topo, a, sched.AllReduce, n, 1<<20, Options{Trace: func(s TraceStep) { steps[s.Rank] = append(steps[s.Rank], s) }})
	if err != nil {
		t.Fatal(err)
	}
	s := sched.Uniform(sched.AllReduce, n, 1<<18, 0, false)
	last := 0.0
	for rank := range n {
		p, _ := a.Build(s, rank)
		if len(steps[rank]) != len(p.Steps) {
			t.Fatalf("rank %d: %d steps traced, program has %d", rank, len(steps[rank]), len(p.Steps))
		}
		for i, st := range steps[rank] {
			if st.Step != i || st.End < st.Start || (i > 0 && st.Start != steps[rank][i-1].End) || len(st.Ops) != len(p.Steps[i].Ops) {
				t.Fatalf("rank %d step %d: %+v", rank, i, st)
			}
		}
		last = max(last, steps[rank][len(steps[rank])-1].End)
	}
	if last != r.Time {
		t.Errorf("last step ends at %g, collective time %g", last, r.Time)
	}
}

// TestFold checks folding in time against simulating every step: the same
// time and critical path to rounding, with most steps jumped over.
func TestFold(t *testing.T) {
	cases := []struct {
		coll  sched.Coll
		name  string
		n     int
		bytes int64
		rack  int // hosts per rack (0: 4)
	}{
		{sched.AllReduce, "ring", 256, 1 << 20, 0},
		{sched.AllReduce, "ring", 256, 64 << 20, 0},
		{sched.AllReduce, "ring", 96, 8 << 20, 0}, // not a power of two
		{sched.AllGather, "ring", 256, 4 << 20, 0},
		{sched.ReduceScatter, "ring", 256, 4 << 20, 0},
		{sched.AllReduce, "hier", 256, 16 << 20, 0},
		{sched.AllReduce, "hring", 256, 16 << 20, 0},
		// Latency-bound: one rack hop per 80 ranks makes a period of 80
		// steps, more than 64.
		{sched.AllReduce, "ring", 480, 1 << 20, 20},
	}
	for _, c := range cases {
		topo := Default()
		topo.RanksPerHost, topo.HostsPerRack = 4, cmp.Or(c.rack, 4)
		var a algo.Algorithm
		for _, x := range topo.Algorithms(c.coll, c.n) {
			if x.Name == c.name {
				a = x
			}
		}
		if a.Build == nil {
			t.Fatalf("no %s %s", c.coll, c.name)
		}
		f, err := Simulate(topo, a, c.coll, c.n, c.bytes, Options{})
		if err != nil {
			t.Fatalf("%s %s: %v", c.coll, c.name, err)
		}
		e, err := Simulate(topo, a, c.coll, c.n, c.bytes, Options{NoFold: true})
		if err != nil {
			t.Fatalf("%s %s: %v", c.coll, c.name, err)
		}
		if e.Folded != 0 {
			t.Errorf("%s %s: NoFold folded %d steps", c.coll, c.name, e.Folded)
		}
		if f.Folded == 0 {
			t.Errorf("%s %s n=%d: nothing folded", c.coll, c.name, c.n)
		}
		if !near(f.Time, e.Time, 1e-9) || f.Chunks != e.Chunks || f.Events != e.Events {
			t.Errorf("%s %s n=%d: folded %g s (%d chunks, %d events), step by step %g s (%d, %d)",
				c.coll, c.name, c.n, f.Time, f.Chunks, f.Events, e.Time, e.Chunks, e.Events)
		}
		fb, eb := f.Critical, e.Critical
		// (The path's last ranks may differ: ranks ending at the same
		// time, to rounding, are ties.)
		if fb.Msgs != eb.Msgs || fb.Bytes != eb.Bytes {
			t.Errorf("%s %s: critical path %v %v, step by step %v %v", c.coll, c.name, fb.Msgs, fb.Bytes, eb.Msgs, eb.Bytes)
		}
		for i, p := range [][2]float64{{fb.Alpha, eb.Alpha}, {fb.Transfer, eb.Transfer}, {fb.Queue, eb.Queue}, {fb.Reduce, eb.Reduce}, {fb.Local, eb.Local}} {
			if math.Abs(p[0]-p[1]) > 1e-9*e.Time {
				t.Errorf("%s %s: critical path part %d %g, step by step %g", c.coll, c.name, i, p[0], p[1])
			}
		}
	}
}

// TestXORPeriod checks the programs repeating under XOR (recursive doubling
// and halving): one host's or rack's ranks stand for all, exactly, and a
// host size that is not a power of two falls back to simulating them all.
func TestXORPeriod(t *testing.T) {
	topo := Default()
	topo.RanksPerHost, topo.HostsPerRack = 4, 2
	for _, name := range []string{"rd", "hd"} {
		a := lookup(t, sched.AllReduce, name)
		for _, bytes := range []int64{1 << 10, 8 << 20} {
			q, err := Simulate(topo, a, sched.AllReduce, 128, bytes, Options{})
			if err != nil {
				t.Fatal(err)
			}
			f, err := Simulate(topo, a, sched.AllReduce, 128, bytes, Options{NoQuotient: true})
			if err != nil {
				t.Fatal(err)
			}
			if !q.XOR || q.Period != 1 || q.Simulated != 8 {
				t.Errorf("%s: period %d (XOR %v), %d simulated; want 1 by XOR, 8 (one rack)", name, q.Period, q.XOR, q.Simulated)
			}
			if q.Time != f.Time || q.Critical.Msgs != f.Critical.Msgs {
				t.Errorf("%s %d B: %d ranks give %g s, all give %g s", name, bytes, q.Simulated, q.Time, f.Time)
			}
		}
	}
	odd := topo
	odd.RanksPerHost, odd.HostsPerRack = 6, 0
	a := lookup(t, sched.AllReduce, "rd")
	q, err := Simulate(odd, a, sched.AllReduce, 64, 1<<16, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, _ := Simulate(odd, a, sched.AllReduce, 64, 1<<16, Options{NoQuotient: true})
	if q.Simulated != 64 || q.Time != f.Time {
		t.Errorf("hosts of 6: %d simulated, %g s; all: %g s", q.Simulated, q.Time, f.Time)
	}
}

// TestScale checks what keeps 16,384 ranks cheap, on a smaller machine of
// the same shape (512 ranks, hosts of 4, racks of 8 hosts, blocks of
// 64 KiB as at 16,384 ranks and 1 GiB): ring simulates one rack and jumps
// over most of its steps, recursive doubling and halving simulate one
// rack by XOR.
func TestScale(t *testing.T) {
	topo := Default()
	topo.RanksPerHost, topo.HostsPerRack = 4, 8
	const n = 512
	for _, c := range []struct {
		name     string
		xor      bool
		foldMost bool
	}{{"ring", false, true}, {"rd", true, false}, {"hd", true, false}} {
		r, err := Simulate(topo, lookup(t, sched.AllReduce, c.name), sched.AllReduce, n, n<<16, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Simulated != 32 || r.XOR != c.xor {
			t.Errorf("%s: %d ranks simulated (XOR %v), want 32 (XOR %v)", c.name, r.Simulated, r.XOR, c.xor)
		}
		if steps := int64(2 * (n - 1)); c.foldMost && r.Folded < steps*3/4 {
			t.Errorf("%s: %d of %d steps folded", c.name, r.Folded, steps)
		}
	}
}

// TestShapedLink checks the token bucket of a shaped link (NICBurst): a
// message within the tokens leaves at the line rate, a loop of messages
// settles at the shaped rate, and receiving is not shaped when NICRxBW is
// high (two senders into one rank take about as long as one: the second
// waits only for the first's bytes at the line rate).
func TestShapedLink(t *testing.T) {
	topo := Default()
	topo.RanksPerHost, topo.HostsPerRack, topo.Cores = 1, 0, 1
	topo.Net = Link{Alpha: 1e-6, Beta: 1e-9} // line: 1 GB/s
	topo.NICBW, topo.NICLineBW, topo.NICRxBW = 1e8, 1e9, 1e9
	topo.Gamma, topo.CopyBeta = 0, 0
	topo.NICBurst = 1 << 20
	a := lookup(t, sched.AllReduce, "rd")
	const b = 64 << 10 // per call, per rank: 64 KiB out
	loop := func(reps int) float64 {
		r, err := Simulate(topo, a, sched.AllReduce, 2, b, Options{Repeat: reps})
		if err != nil {
			t.Fatal(err)
		}
		return r.Time
	}
	// The buckets start empty: calls back to back go at the shaped rate.
	if per, want := (loop(8)-loop(3))/5, float64(b)/1e8; !near(per, want, 0.01) {
		t.Errorf("a call in a loop: %g s, want %g (shaped rate)", per, want)
	}
	// A burst after idling: the first message goes at the line rate.
	idle := topo
	idle.NICBW = 1e9 // tokens refill at once: as if the bucket were full
	r, _ := Simulate(idle, a, sched.AllReduce, 2, b, Options{})
	if want := 1e-6 + float64(b)*1e-9; !near(r.Time, want, 1e-6) {
		t.Errorf("unshaped call %g s, want %g", r.Time, want)
	}
	rx := topo
	rx.NICBurst = 0
	g := lookup(t, sched.Gather, "linear")
	two, _ := Simulate(rx, g, sched.Gather, 3, 3*b, Options{})
	one, _ := Simulate(rx, g, sched.Gather, 2, 2*b, Options{})
	if !(two.Time < one.Time+2*float64(b)/1e9) {
		t.Errorf("gather from 2 with an unshaped receiver: %g s, from 1: %g s", two.Time, one.Time)
	}
	rx.NICRxBW = 0 // receiving shaped as sending: the flows queue
	two, _ = Simulate(rx, g, sched.Gather, 3, 3*b, Options{})
	if !(two.Time > 1.9*one.Time) {
		t.Errorf("gather from 2 through one shaped receiver: %g s, from 1: %g s", two.Time, one.Time)
	}
	bad := topo
	bad.NICLineBW = 0
	if bad.Check() == nil {
		t.Error("nic_burst without nic_line_bw accepted")
	}
}

// TestRepeat checks that a loop of R calls takes R calls' time where
// nothing carries over between them (ring on one host, no contention).
func TestRepeat(t *testing.T) {
	topo := flat(5e-6, 1e-9)
	topo.Cores = 4
	a := lookup(t, sched.AllReduce, "ring")
	one, _ := Simulate(topo, a, sched.AllReduce, 4, 1<<20, Options{})
	five, err := Simulate(topo, a, sched.AllReduce, 4, 1<<20, Options{Repeat: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !near(five.Time, 5*one.Time, 1e-9) || five.Chunks != 5*one.Chunks {
		t.Errorf("5 calls: %g s, %d chunks; one: %g s, %d chunks", five.Time, five.Chunks, one.Time, one.Chunks)
	}
}

// TestOversubscribed: the switch cost applies only to hosts with more
// ranks than cores, per chunk on a core: two ranks exchanging one small
// chunk each on one core pay two switches in a row; with a core each,
// nothing. A copy holds a core for its core share of b·β only.
func TestOversubscribed(t *testing.T) {
	const alpha, sw = 1e-6, 3e-6
	tp := flat(alpha, 0)
	tp.Cores, tp.SHMSwitch = 2, sw
	ar := lookup(t, sched.AllReduce, "rd")
	r, err := Simulate(tp, ar, sched.AllReduce, 2, 8, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.Time, alpha, 1e-9) {
		t.Errorf("2 ranks on 2 cores: %g s, want α = %g (no switch)", r.Time, alpha)
	}
	tp.Cores = 1
	if r, err = Simulate(tp, ar, sched.AllReduce, 2, 8, Options{}); err != nil {
		t.Fatal(err)
	}
	if want := alpha + 2*sw; !near(r.Time, want, 1e-9) {
		t.Errorf("2 ranks on 1 core: %g s, want α + 2 switches = %g", r.Time, want)
	}
	// A rank that waited sees its chunk a wake later per other rank on
	// its core (ceil(ranks/cores) − 1); not at all on a core of its own.
	const wake = 2e-6
	tp.SHMWake, tp.SHMSwitch = wake, 0
	for _, c := range []struct {
		n, cores int
		want     float64
	}{
		{2, 2, alpha},
		{2, 1, alpha + wake},
		{4, 2, 2 * (alpha + wake)},   // two steps, one other rank per core
		{8, 2, 3 * (alpha + 3*wake)}, // three steps, three
	} {
		tp.Cores = c.cores
		if r, err = Simulate(tp, ar, sched.AllReduce, c.n, 8, Options{}); err != nil {
			t.Fatal(err)
		}
		if !near(r.Time, c.want, 1e-9) {
			t.Errorf("%d ranks on %d cores with a wake: %g s, want %g", c.n, c.cores, r.Time, c.want)
		}
	}
	tp.SHMWake = 0
	// 1 MiB each way, β only: on one core the two copies serialise for
	// their core share of the time.
	const mib, beta = 1 << 20, 1e-9
	tp = flat(0, beta)
	tp.Cores = 1
	for _, share := range []float64{1, 0.5} {
		tp.SHMCoreShare = share
		r, err := Simulate(tp, ar, sched.AllReduce, 2, mib, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The second copy starts when the first releases the core.
		if want := (1 + share) * mib * beta; !near(r.Time, want, 1e-6) {
			t.Errorf("core share %g: %g s, want %g", share, r.Time, want)
		}
	}
}

// TestSlots checks the group-call model: which calls are group calls, and
// a call's time where it can be worked out by hand.
func TestSlots(t *testing.T) {
	loc := Local()
	for _, c := range []struct {
		coll  sched.Coll
		n     int
		bytes int64
		topo  Topology
		want  bool
	}{
		{sched.AllReduce, 2, 8, loc, true},
		{sched.AllReduce, 8, 1024, loc, true},
		{sched.AllReduce, 8, 1028, loc, false},
		{sched.AllGather, 8, 8192, loc, true}, // 1 KiB each
		{sched.AllGather, 8, 8200, loc, false},
		{sched.Barrier, 4, 0, loc, true},
		{sched.AllReduce, 1, 8, loc, false},
		{sched.AllReduce, 16, 8, Default(), false}, // two hosts
		{sched.AllReduce, 8, 8, Default(), true},
	} {
		if got := SlotFits(c.topo, c.coll, c.n, c.bytes); got != c.want {
			t.Errorf("SlotFits(%s, %d ranks, %d B) = %v, want %v", c.coll, c.n, c.bytes, got, c.want)
		}
	}
	if _, err := Slots(loc, sched.AllReduce, 16, 1<<20, Options{}); !errors.Is(err, ErrNoSlots) {
		t.Errorf("1 MiB: %v, want ErrNoSlots", err)
	}
	// No bytes cost: a call is the slot α on cores of their own.
	tp := flat(0, 0)
	tp.SlotAlpha = 1e-6
	for _, reps := range []int{1, 5} {
		r, err := Slots(tp, sched.AllReduce, 2, 8, Options{Repeat: reps})
		if err != nil {
			t.Fatal(err)
		}
		if want := float64(reps) * 1e-6; !near(r.Time, want, 1e-9) || r.Algo != SlotAlgo {
			t.Errorf("%d calls: %s %g s, want %g", reps, r.Algo, r.Time, want)
		}
	}
	// 4 ranks on one core: the writes take turns (a switch each), the
	// last is visible α later, and the ranks that waited for it see it
	// 3 wakes later (3 ranks per core beyond one).
	const sw, alpha, wake = 1e-6, 2e-6, 0.5e-6
	tp.Cores, tp.SHMSwitch, tp.SlotAlpha, tp.SHMWake = 1, sw, alpha, wake
	r, err := Slots(tp, sched.AllReduce, 4, 8, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := 4*sw + alpha + 3*wake; !near(r.Time, want, 1e-9) {
		t.Errorf("4 ranks on 1 core: %g s, want %g", r.Time, want)
	}
	if got := r.Critical.Total(); !near(got, r.Time, 1e-9) {
		t.Errorf("critical path adds up to %g s, not %g", got, r.Time)
	}
	// A group call waits for every rank of the host: a wake per other
	// rank per core (7/2 on 8 ranks and 2 cores), unlike a schedule's
	// wait (the ranks on its own core only).
	tp.Cores, tp.SHMSwitch = 2, 0
	if r, err = Slots(tp, sched.AllReduce, 8, 8, Options{}); err != nil {
		t.Fatal(err)
	}
	if want := alpha + 3.5*wake; !near(r.Time, want, 1e-9) {
		t.Errorf("8 ranks on 2 cores: %g s, want %g", r.Time, want)
	}
	// SlotWake replaces SHMWake in a group call, not in a schedule's wait.
	tp.SlotWake = 2 * wake
	if r, err = Slots(tp, sched.AllReduce, 8, 8, Options{}); err != nil {
		t.Fatal(err)
	}
	if want := alpha + 3.5*2*wake; !near(r.Time, want, 1e-9) {
		t.Errorf("8 ranks on 2 cores, slot wake %g: %g s, want %g", tp.SlotWake, r.Time, want)
	}
	ring := lookup(t, sched.AllReduce, "ring")
	var sched2 [2]float64
	for i, sw := range []float64{0, 5 * wake} {
		tp.SlotWake = sw
		rr, err := Simulate(tp, ring, sched.AllReduce, 8, 64, Options{})
		if err != nil {
			t.Fatal(err)
		}
		sched2[i] = rr.Time
	}
	if sched2[0] != sched2[1] {
		t.Errorf("ring on 8 ranks: %g s, %g s with a slot wake", sched2[0], sched2[1])
	}
}

// TestTurnCache: a host running more ranks than cores whose buffers and
// rings fit the cache copies at SHMTurnCache of its uncached time, not
// CacheFactor; a host with a core per rank, or one whose data does not
// fit, is unaffected.
func TestTurnCache(t *testing.T) {
	ring := lookup(t, sched.AllReduce, "ring")
	for _, c := range []struct {
		n     int
		bytes int64
		slows bool
	}{{2, 512 << 10, false}, {8, 512 << 10, true}, {8, 16 << 20, false}} {
		var ts [2]float64
		for i, tc := range []float64{0, 1} {
			tp := Local()
			tp.SHMTurnCache = tc
			r, err := Simulate(tp, ring, sched.AllReduce, c.n, c.bytes, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ts[i] = r.Time
		}
		if slower := ts[1] > 1.2*ts[0]; slower != c.slows || !c.slows && ts[1] != ts[0] {
			t.Errorf("%d ranks on 2 cores, %d B: %g s at the cache factor, %g s with turns evicting the caches", c.n, c.bytes, ts[0], ts[1])
		}
	}
	tp := Local()
	tp.SHMTurnCache = 1.5
	if tp.Check() == nil {
		t.Error("a turn cache factor of 1.5 accepted")
	}
}

// TestMemShare: a host running more ranks than cores gets SHMMemShare of
// its memory bandwidth beyond the cache; one with a core per rank all of
// it, and so does a host whose ranks' buffers and rings fit in the cache.
func TestMemShare(t *testing.T) {
	const mib = 1 << 20
	ring := lookup(t, sched.AllReduce, "ring")
	for _, c := range []struct {
		n     int
		cache int64
		slows bool
	}{{2, 0, false}, {8, 0, true}, {8, 1 << 30, false}} {
		var ts [2]float64
		for i, share := range []float64{1, 0.5} {
			tp := Local()
			tp.CacheBytes, tp.SHMMemShare = c.cache, share
			tp.SHM.Beta = 0.01e-9 // memory-bound
			r, err := Simulate(tp, ring, sched.AllReduce, c.n, 16*mib, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ts[i] = r.Time
		}
		if slower := ts[1] > 1.5*ts[0]; slower != c.slows || !c.slows && ts[1] != ts[0] {
			t.Errorf("%d ranks on 2 cores, %d B of cache: %g s with all the memory bandwidth, %g s with half", c.n, c.cache, ts[0], ts[1])
		}
	}
}

// TestOverlap: a step whose local ops write at least exec.OverlapMin runs
// them beside its messages when each rank has exec.OverlapProcs cores
// (as the executor does), before them otherwise.
func TestOverlap(t *testing.T) {
	const beta = 1e-9
	tp := flat(0, beta)
	tp.CopyBeta = beta
	ag := lookup(t, sched.AllGather, "ring")
	const total = 4 << 20 // 2 MiB blocks: a 2 MiB copy of the own block
	var times [2]float64
	for i, cores := range []int{2, 2 * exec.OverlapProcs} {
		tp.Cores = cores
		r, err := Simulate(tp, ag, sched.AllGather, 2, total, Options{})
		if err != nil {
			t.Fatal(err)
		}
		times[i] = r.Time
	}
	// Before: the copy (2 MiB·β), then the block (2 MiB·β); beside: the
	// longer of the two.
	block := float64(total/2) * beta
	if !near(times[0], 2*block, 1e-6) || !near(times[1], block, 1e-6) {
		t.Errorf("ring AllGather of 2 MiB blocks: %g s with a core per rank, %g s with %d; want %g and %g",
			times[0], times[1], exec.OverlapProcs, 2*block, block)
	}
}

// TestWorkingSet: the cache must hold a host's buffers and the rings its
// messages cycle through (ringSlots positions of up to a message each,
// at most ringSlots × SHMEager per directed pair).
func TestWorkingSet(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		coll  sched.Coll
		name  string
		n     int
		bytes int64
		want  int64
	}{
		{sched.AllReduce, "rd", 2, 512 << 10, 2 * (mib + mib)},                    // in+out, one 1 MiB ring
		{sched.AllReduce, "ring", 8, 512 << 10, 8 * (mib + 256<<10)},              // one peer sent to, 64 KiB messages
		{sched.AllReduce, "rd", 8, 512 << 10, 8 * (mib + 3*mib)},                  // three peers, whole rings
		{sched.AllGather, "rd", 8, 512 << 10, 8 * (576<<10 + (256+512+1024)<<10)}, // 64, 128, 256 KiB messages
		{sched.AllReduce, "rd", 2, 8, 2 * (16 + 4*8)},
	} {
		a := lookup(t, c.coll, c.name)
		s, es, reported, err := Spec(c.coll, c.n, c.bytes)
		if err != nil {
			t.Fatal(err)
		}
		P, _, err := period(a, s, es)
		if err != nil {
			t.Fatal(err)
		}
		ps := newPrograms()
		for r := range P {
			p, err := build(a, s, r)
			if err != nil {
				t.Fatal(err)
			}
			if err := ps.add(p, es); err != nil {
				t.Fatal(err)
			}
		}
		if got := Local().workingSet(c.n, P, ps, bufBytes(c.coll, c.n, reported)); got != c.want {
			t.Errorf("%v %s on %d ranks at %d bytes: working set %d, want %d", c.coll, c.name, c.n, c.bytes, got, c.want)
		}
	}
}

// TestNetCPU: a network message costs NetCPU on a core of its sender's
// machine before it leaves. Hosts with cores of their own pay it once per
// step; hosts sharing one machine's cores (network namespaces) take turns:
// 4 ranks' rd AllReduce (2 steps of one small message each) on one core
// is 8 sends' CPU time and a last α, on two about half of it.
func TestNetCPU(t *testing.T) {
	const alpha, cpu = 1e-6, 10e-6
	tp := Default()
	tp.RanksPerHost, tp.HostsPerRack, tp.Cores = 1, 0, 1
	tp.Net = Link{Alpha: alpha, Beta: 1e-15}
	tp.NICBW, tp.UplinkBW = 1e15, 1e15
	tp.Gamma, tp.CopyBeta = 0, 0
	tp.NetCPU = cpu
	rd := lookup(t, sched.AllReduce, "rd")
	for _, c := range []struct {
		perMachine, cores int
		lo, hi            float64
	}{
		{0, 1, 2 * (cpu + alpha), 2 * (cpu + alpha)}, // a core per host: never queues
		{4, 1, 8*cpu + alpha, 8*cpu + alpha},         // one core for all 8 sends
		{4, 2, 4*cpu + alpha, 5*cpu + 2*alpha},       // two cores
		{2, 1, 4*cpu + alpha, 5*cpu + 2*alpha},       // two machines of one core
	} {
		tc := tp
		tc.HostsPerMachine, tc.Cores = c.perMachine, c.cores
		r, err := Simulate(tc, rd, sched.AllReduce, 4, 8, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Time < c.lo*(1-1e-6) || r.Time > c.hi*(1+1e-6) {
			t.Errorf("%d hosts per machine of %d cores: %g s, want %g to %g", c.perMachine, c.cores, r.Time, c.lo, c.hi)
		}
		if !near(r.Critical.Total(), r.Time, 1e-9) {
			t.Errorf("%d hosts per machine of %d cores: critical path %g, time %g", c.perMachine, c.cores, r.Critical.Total(), r.Time)
		}
	}
	tc := tp
	tc.HostsPerMachine = 4
	if s := tc.String(4); !strings.Contains(s, "1 cores per machine of up to 4 hosts, 10 µs of a core per network message") {
		t.Errorf("String: %s", s)
	}
	// One period of machines stands for all of them.
	tq := Default()
	tq.RanksPerHost, tq.HostsPerRack, tq.HostsPerMachine, tq.Cores = 2, 0, 4, 2
	tq.NetCPU = 5e-6
	for _, c := range []struct {
		name  string
		bytes int64
	}{{"ring", 4096}, {"ring", 1 << 20}, {"rd", 8}, {"hd", 1 << 20}} {
		a := lookup(t, sched.AllReduce, c.name)
		q, err := Simulate(tq, a, sched.AllReduce, 32, c.bytes, Options{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := Simulate(tq, a, sched.AllReduce, 32, c.bytes, Options{NoQuotient: true})
		if err != nil {
			t.Fatal(err)
		}
		if q.Simulated >= 32 || !near(q.Time, f.Time, 1e-9) {
			t.Errorf("%s %d B: %d ranks simulated give %g s, all 32 give %g", c.name, c.bytes, q.Simulated, q.Time, f.Time)
		}
	}
	for _, bad := range []func(*Topology){
		func(t *Topology) { t.NetCPU = -1e-6 },
		func(t *Topology) { t.NetCPU = 2 },
		func(t *Topology) { t.HostsPerMachine = -1 },
	} {
		tb := tp
		bad(&tb)
		if tb.Check() == nil {
			t.Errorf("%+v accepted", tb)
		}
	}
}

// TestFusions checks the executor's large-message fusions over shared
// memory as simulated: 2-rank ring AllReduce whose messages reach
// exec.ExchangeMin runs its two steps as one fused exchange (one step of
// the first message sent, the peer's reduced and sent back piece by piece
// from the cache, the peer's reduced pieces received), the copy of an
// AllGather's own block from exec.CopySendMin rides the send, copied from
// the cache; below those sizes, across hosts or with Options.Unfused,
// nothing changes. On one core per rank with no latency every op is CPU
// time: the fused exchange costs m·(β + γ + f·β) for messages of m bytes
// (f the cache factor), the unfused steps at least m·(2β + γ); the AllGather
// m·(β + f·β_copy) against m·(β + β_copy).
func TestFusions(t *testing.T) {
	const beta, gamma, f = 1e-9, 0.5e-9, 0.5
	tp := flat(0, beta)
	tp.CopyBeta, tp.Gamma, tp.Cores, tp.CacheFactor = beta, gamma, 2, f
	sim := func(tp Topology, coll sched.Coll, name string, bytes int64, unfused bool) (float64, []TraceStep) {
		t.Helper()
		var steps []TraceStep
		r, err := Simulate(tp, lookup(t, coll, name), coll, 2, bytes, Options{Unfused: unfused, Trace: func(s TraceStep) {
			if s.Rank == 0 {
				steps = append(steps, s)
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		return r.Time, steps
	}
	m := int64(2 * exec.ExchangeMin) // a message of 2·ExchangeMin
	fused, steps := sim(tp, sched.AllReduce, "ring", 2*m, false)
	unfused, usteps := sim(tp, sched.AllReduce, "ring", 2*m, true)
	if len(steps) != 1 || len(steps[0].Ops) != 3 || steps[0].Ops[1].Kind != sched.RecvReduceSend || steps[0].Ops[1].To != 1 || len(usteps) != 2 {
		t.Fatalf("2-rank ring AllReduce of %d-byte messages: traced %+v fused, %+v unfused; want one step of a send, a receive-reduce-send back to the peer and a receive, and two steps", m, steps, usteps)
	}
	fm := float64(m)
	if want := fm * (beta + gamma + f*beta); !near(fused, want, 1e-3) || unfused < fm*(2*beta+gamma) {
		t.Errorf("2-rank ring AllReduce of %d-byte messages: %g s fused, %g unfused; want %g and at least %g", m, fused, unfused, want, fm*(2*beta+gamma))
	}
	// Below ExchangeMin, and between hosts, the steps are not fused.
	small := int64(exec.ExchangeMin / 2)
	apart := tp
	apart.RanksPerHost = 1
	for _, c := range []struct {
		tp    Topology
		bytes int64
	}{{tp, 2 * small}, {apart, 2 * m}} {
		x, steps := sim(c.tp, sched.AllReduce, "ring", c.bytes, false)
		y, _ := sim(c.tp, sched.AllReduce, "ring", c.bytes, true)
		if x != y || len(steps) != 2 {
			t.Errorf("ring AllReduce of %d bytes, %d ranks per host: %g s, unfused %g, %d steps; want the same, 2 steps", c.bytes, c.tp.RanksPerHost, x, y, len(steps))
		}
	}
	// The own block's copy rides its send from CopySendMin on.
	for _, block := range []int64{exec.CopySendMin, exec.CopySendMin / 2} {
		x, _ := sim(tp, sched.AllGather, "ring", 2*block, false)
		y, _ := sim(tp, sched.AllGather, "ring", 2*block, true)
		fb := float64(block)
		wantX := fb * (beta + f*beta)
		if block < exec.CopySendMin {
			wantX = y
		}
		if !near(x, wantX, 1e-3) || !near(y, 2*fb*beta, 1e-3) {
			t.Errorf("2-rank AllGather of %d-byte blocks: %g s, unfused %g; want %g and %g", block, x, y, wantX, 2*fb*beta)
		}
	}
}

// TestFusedQuotient: hd's pair exchange (its middle steps, with the rank
// next door) is fused on a host of several ranks, in the middle of a
// program, and simulating one period of ranks gives what simulating every
// rank does, fused or not.
func TestFusedQuotient(t *testing.T) {
	tp := Default()
	tp.HostsPerRack = 0
	const n, bytes = 32, 1 << 30 // messages of the pair exchange: 32 MiB
	a := lookup(t, sched.AllReduce, "hd")
	var times [2]float64
	for i, unfused := range []bool{false, true} {
		q, err := Simulate(tp, a, sched.AllReduce, n, bytes, Options{Unfused: unfused})
		if err != nil {
			t.Fatal(err)
		}
		all, err := Simulate(tp, a, sched.AllReduce, n, bytes, Options{Unfused: unfused, NoQuotient: true})
		if err != nil {
			t.Fatal(err)
		}
		if q.Simulated >= n || all.Simulated != n || !near(q.Time, all.Time, 1e-9) {
			t.Errorf("unfused %v: %d ranks simulated in %g s, all %d in %g s", unfused, q.Simulated, q.Time, all.Simulated, all.Time)
		}
		times[i] = q.Time
	}
	if times[0] >= times[1] {
		t.Errorf("hd on %d ranks of 8 a host at 1 GiB: %g s fused, %g unfused; want the fused pair exchange faster", n, times[0], times[1])
	}
}

// TestNetWake: on a machine running more ranks than cores, a rank that
// waited for a network message sees it NetWake later per other rank on a
// core of its machine. 4 ranks' rd AllReduce of 8 B (2 exchanges, each
// rank waiting for each) on hosts sharing one machine: 2(α + 3w) on one
// core, 2(α + w) on two, 2α with a core per host or without the term.
func TestNetWake(t *testing.T) {
	const alpha, wake = 1e-6, 4e-6
	tp := Default()
	tp.RanksPerHost, tp.HostsPerRack, tp.Cores = 1, 0, 1
	tp.Net = Link{Alpha: alpha, Beta: 1e-15}
	tp.NICBW, tp.UplinkBW = 1e15, 1e15
	tp.Gamma, tp.CopyBeta = 0, 0
	tp.NetWake = wake
	rd := lookup(t, sched.AllReduce, "rd")
	for _, c := range []struct {
		perMachine, cores int
		wake, want        float64
	}{
		{0, 1, wake, 2 * alpha},            // a core per host
		{4, 1, wake, 2 * (alpha + 3*wake)}, // 3 other ranks on the core
		{4, 2, wake, 2 * (alpha + wake)},   // 1 other rank a core
		{4, 4, wake, 2 * alpha},            // a core per rank
		{4, 1, 0, 2 * alpha},               // no term
		{2, 1, wake, 2*alpha + 2*wake},     // two machines of 2 hosts on a core each
	} {
		tc := tp
		tc.HostsPerMachine, tc.Cores, tc.NetWake = c.perMachine, c.cores, c.wake
		r, err := Simulate(tc, rd, sched.AllReduce, 4, 8, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !near(r.Time, c.want, 1e-6) {
			t.Errorf("%d hosts per machine of %d cores, wake %g: %g s, want %g", c.perMachine, c.cores, c.wake, r.Time, c.want)
		}
		if !near(r.Critical.Total(), r.Time, 1e-9) {
			t.Errorf("%d hosts per machine of %d cores: critical path %g, time %g", c.perMachine, c.cores, r.Critical.Total(), r.Time)
		}
	}
	// One period of machines stands for all of them.
	tq := Default()
	tq.RanksPerHost, tq.HostsPerRack, tq.HostsPerMachine, tq.Cores = 2, 0, 4, 2
	tq.NetCPU, tq.NetWake = 5e-6, 3e-6
	for _, c := range []struct {
		name  string
		bytes int64
	}{{"ring", 4096}, {"rd", 8}} {
		name := c.name
		a := lookup(t, sched.AllReduce, name)
		q, err := Simulate(tq, a, sched.AllReduce, 32, c.bytes, Options{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := Simulate(tq, a, sched.AllReduce, 32, c.bytes, Options{NoQuotient: true})
		if err != nil {
			t.Fatal(err)
		}
		if q.Simulated >= 32 || !near(q.Time, f.Time, 1e-9) {
			t.Errorf("%s: %d ranks simulated give %g s, all 32 give %g", name, q.Simulated, q.Time, f.Time)
		}
	}
	tc := tp
	tc.HostsPerMachine = 4
	if s := tc.String(4); !strings.Contains(s, "a network wait's wake 4 µs per other rank on a core") {
		t.Errorf("String: %s", s)
	}
	for _, bad := range []float64{-1e-6, 2} {
		tb := tp
		tb.NetWake = bad
		if tb.Check() == nil {
			t.Errorf("net_wake %g accepted", bad)
		}
	}
}

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// childEnv makes the test binary run the example's main as one rank.
const childEnv = "HCOMM_PROM_TEST_CHILD"

func TestMain(m *testing.M) {
	if args := os.Getenv(childEnv); args != "" {
		os.Args = append([]string{os.Args[0]}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// scrape fetches url and parses it with the Prometheus text parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return fams
}

// series returns the metrics of family name whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var ms []*dto.Metric
	f := fams[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		ms = append(ms, m)
	}
	return ms
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// checkRank asserts rank's scraped series: every collective counted once,
// with its bytes, chunks, latency and wait, under its algorithm.
func checkRank(t *testing.T, fams map[string]*dto.MetricFamily, rank, size, iters, elems int, comm string) {
	t.Helper()
	rl := strconv.Itoa(rank)
	for _, op := range []string{"AllReduce", "Broadcast"} {
		want := map[string]string{"rank": rl, "op": op, "comm": comm}
		ops := series(fams, "hcomm_collectives_total", want)
		if len(ops) != 1 {
			t.Fatalf("rank %d %s: %d series of hcomm_collectives_total, want 1 (one algorithm)", rank, op, len(ops))
		}
		n := iters
		if op == "AllReduce" {
			n = 2 * iters // also on the stream
		}
		if got := ops[0].GetCounter().GetValue(); got != float64(n) || label(ops[0], "algo") == "" {
			t.Errorf("rank %d %s: %v collectives by algo %q, want %d", rank, op, got, label(ops[0], "algo"), n)
		}
		want["algo"] = label(ops[0], "algo")
		if b := series(fams, "hcomm_collective_bytes_total", want); len(b) != 1 || b[0].GetCounter().GetValue() != float64(n*4*elems) {
			t.Errorf("rank %d %s: bytes %v, want %d", rank, op, b, n*4*elems)
		}
		// Every rank of an AllReduce moves at least one message, and a
		// Broadcast's non-root ranks receive at least one.
		if c := series(fams, "hcomm_collective_chunks_total", want); len(c) != 1 || c[0].GetCounter().GetValue() < float64(iters*(size-1)/size) {
			t.Errorf("rank %d %s: chunks %v", rank, op, c)
		}
		for _, h := range []string{"hcomm_collective_duration_seconds", "hcomm_collective_wait_seconds"} {
			s := series(fams, h, want)
			if len(s) != 1 || s[0].GetHistogram().GetSampleCount() != uint64(n) {
				t.Fatalf("rank %d %s: %s %v, want %d samples", rank, op, h, s, n)
			}
			if h == "hcomm_collective_duration_seconds" && !(s[0].GetHistogram().GetSampleSum() > 0) {
				t.Errorf("rank %d %s: total duration %v", rank, op, s[0].GetHistogram().GetSampleSum())
			}
		}
	}
	for _, k := range []struct{ stream, kind string }{{"comm", "wait"}, {"comm", "AllReduce"}} {
		s := series(fams, "hcomm_stream_seconds", map[string]string{"rank": rl, "comm": comm, "stream": k.stream, "kind": k.kind})
		if len(s) != 1 || s[0].GetHistogram().GetSampleCount() != uint64(iters) {
			t.Errorf("rank %d: stream %s %s: %v, want %d samples", rank, k.stream, k.kind, s, iters)
		}
	}
	if f := series(fams, "hcomm_collective_failures_total", map[string]string{"rank": rl}); len(f) != 0 {
		t.Errorf("rank %d: failures %v in a job that had none", rank, f)
	}
}

// TestScrapeJob starts the example as a job of processes over shared
// memory, each serving /metrics, and scrapes every rank with the
// Prometheus text parser.
func TestScrapeJob(t *testing.T) {
	const n, iters, elems = 3, 7, 1000
	for r, url := range startJob(t, n, iters, elems, "HCOMM_TRANSPORT=shm") {
		fams := scrape(t, url)
		checkRank(t, fams, r, n, iters, elems, "world")
		if p := fams["hcomm_path_sent_bytes_total"]; p != nil {
			t.Errorf("rank %d: network paths over shared memory: %v", r, p)
		}
	}
}

// TestScrapePaths runs the example as 2 processes over TCP with two
// network paths (two loopback addresses) and checks the per-path series:
// both paths to the peer, up, and the bytes each rank sent on a path are
// those its peer received on it.
func TestScrapePaths(t *testing.T) {
	const n, iters, elems = 2, 4, 1 << 20 // 4 MiB: striped over the paths
	urls := startJob(t, n, iters, elems, "HCOMM_TRANSPORT=tcp", "HCOMM_SOCKET_ADDR=127.0.0.1,127.0.0.2")
	// Every rank has finished its collectives: the counters hold still.
	type key struct{ rank, peer, path string }
	sent, recv := map[key]float64{}, map[key]float64{}
	for r, url := range urls {
		fams := scrape(t, url)
		checkRank(t, fams, r, n, iters, elems, "world")
		rl := strconv.Itoa(r)
		for _, name := range []string{"hcomm_path_sent_bytes_total", "hcomm_path_received_bytes_total",
			"hcomm_path_rate_bytes_per_second", "hcomm_path_share", "hcomm_path_up", "hcomm_path_rtt_seconds", "hcomm_path_retransmits_total"} {
			ms := series(fams, name, map[string]string{"rank": rl, "comm": "world"})
			if len(ms) != 2 {
				t.Fatalf("rank %d: %d series of %s, want 2 (paths)", r, len(ms), name)
			}
			for _, m := range ms {
				k := key{rl, label(m, "peer"), label(m, "path")}
				if k.peer != strconv.Itoa(1-r) || (k.path != "0" && k.path != "1") || label(m, "local") == "" || label(m, "remote") == "" {
					t.Errorf("rank %d: %s labels %v", r, name, m.Label)
				}
				v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
				switch name {
				case "hcomm_path_sent_bytes_total":
					sent[k] = v
				case "hcomm_path_received_bytes_total":
					recv[k] = v
				case "hcomm_path_up":
					if v != 1 {
						t.Errorf("rank %d path %s: up %v", r, k.path, v)
					}
				case "hcomm_path_share":
					if v < 0 || v > 1 {
						t.Errorf("rank %d path %s: share %v", r, k.path, v)
					}
				}
			}
		}
	}
	total := 0.0
	for k, v := range sent {
		if got := recv[key{k.peer, k.rank, k.path}]; got != v {
			t.Errorf("rank %s sent %v bytes to rank %s on path %s, which received %v", k.rank, v, k.peer, k.path, got)
		}
		total += v
	}
	// Each 2-rank AllReduce sends at least every rank's buffer.
	if min := float64(2 * 2 * iters * 4 * elems); total < min {
		t.Errorf("%v bytes sent in all, want at least %v", total, min)
	}
}

// startJob starts the example as a job of n processes with env added,
// waits until every rank has run its collectives, and returns each
// rank's metrics URL. The ranks keep serving until the test ends.
func startJob(t *testing.T, n, iters, elems int, env ...string) []string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		url   chan string
		out   strings.Builder
		done  chan error
	}
	procs := make([]*proc, n)
	t.Cleanup(func() {
		for r, p := range procs {
			if p == nil || p.stdin == nil {
				continue
			}
			p.stdin.Close()
			if err := <-p.done; err != nil {
				t.Errorf("rank %d: %v\n%s", r, err, p.out.String())
			}
		}
		cancel()
	})
	for r := range procs {
		p := &proc{url: make(chan string, 1), done: make(chan error, 1)}
		p.cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		p.cmd.Env = append(os.Environ(),
			childEnv+fmt.Sprintf("=-listen 127.0.0.1:0 -iters %d -elems %d -hold stdin", iters, elems),
			"HCOMM_RANK="+strconv.Itoa(r), "HCOMM_SIZE="+strconv.Itoa(n),
			"HCOMM_STORE=file://"+filepath.ToSlash(dir), "HCOMM_TOKEN=prometheus-test")
		p.cmd.Env = append(p.cmd.Env, env...)
		stdin, err := p.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := p.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		p.cmd.Stderr = &syncWriter{w: &p.out}
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p.stdin = stdin
		procs[r] = p
		go func() {
			sc := bufio.NewScanner(stdout)
			var url string
			for sc.Scan() {
				line := sc.Text()
				if _, u, ok := strings.Cut(line, "metrics at "); ok {
					url = u
				}
				if strings.Contains(line, ": done: ") {
					p.url <- url
				}
			}
			close(p.url)
			p.done <- p.cmd.Wait()
		}()
	}
	urls := make([]string, n)
	for r, p := range procs {
		url, ok := <-p.url
		if !ok || url == "" {
			t.Fatalf("rank %d ended without serving its metrics", r)
		}
		urls[r] = url
	}
	return urls
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// TestScrapeLocal: ranks of one process share one endpoint, a rank label
// per series.
func TestScrapeLocal(t *testing.T) {
	const n, iters, elems = 2, 5, 300
	pr, pw := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), config{local: n, listen: "127.0.0.1:0", iters: iters, elems: elems, hold: "stdin"}, pr, outW)
		outW.Close()
	}()
	sc := bufio.NewScanner(outR)
	var url string
	for sc.Scan() {
		if _, u, ok := strings.Cut(sc.Text(), "metrics at "); ok {
			url = u
		}
		if strings.Contains(sc.Text(), ": done: ") {
			break
		}
	}
	if url == "" {
		pw.Close()
		t.Fatalf("no endpoint: %v", <-done)
	}
	fams := scrape(t, url)
	for r := range n {
		checkRank(t, fams, r, n, iters, elems, "local")
	}
	pw.Close()
	go io.Copy(io.Discard, outR)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestFailures: a collective that fails is counted under its cause.
func TestFailures(t *testing.T) {
	m := NewMetrics()
	reg := prometheus.NewRegistry()
	if err := m.Register(reg, nil); err != nil {
		t.Fatal(err)
	}
	comms, err := hcomm.NewLocal(context.Background(), 2, &hcomm.Config{Timeout: time.Minute, Observer: m.Observer(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer comms[1].Close()
	defer comms[0].Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // rank 1 never joins; the call ends with ctx
	x := make([]float64, 4)
	if err := hcomm.AllReduce(ctx, comms[0], x, x, hcomm.Sum); err == nil {
		t.Fatal("AllReduce with a cancelled context succeeded")
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		byName[f.GetName()] = f
	}
	f := series(byName, "hcomm_collective_failures_total", map[string]string{"op": "AllReduce", "comm": "local"})
	if len(f) != 1 || f[0].GetCounter().GetValue() != 1 || label(f[0], "cause") == "" {
		t.Fatalf("failures %v, want one AllReduce", f)
	}
	if c := series(byName, "hcomm_collectives_total", map[string]string{"op": "AllReduce"}); len(c) != 1 || c[0].GetCounter().GetValue() != 1 {
		t.Fatalf("collectives %v, want 1", c)
	}
}

func TestConfigCheck(t *testing.T) {
	good := config{listen: "127.0.0.1:0", iters: 1, elems: 1, hold: "none"}
	if err := good.check(); err != nil {
		t.Fatal(err)
	}
	for _, mod := range []func(*config){
		func(c *config) { c.local = -1 },
		func(c *config) { c.iters = -1 },
		func(c *config) { c.hold = "forever" },
		func(c *config) { c.listen = "nohost" },
		func(c *config) { c.listen = "h:70000" },
	} {
		c := good
		mod(&c)
		if c.check() == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
	if _, p, _ := endpoint("h:9464", 3); p != 9467 {
		t.Errorf("rank 3's port %d, want 9467", p)
	}
}

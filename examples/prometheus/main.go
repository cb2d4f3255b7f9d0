// Command prometheus runs collectives and exports what they did as
// Prometheus metrics: collectives, bytes, chunks, latency and wait
// histograms per communicator, collective and algorithm, failures by
// cause, and Bucketer launches (metrics.go, an hcomm.Observer), and the
// network paths to peers reached over TCP (paths.go). It is its
// own module so that the hcomm library does not depend on the Prometheus
// client.
//
// Run it as a job of processes, each rank serving its own /metrics (port
// plus the rank, or any free port with port 0):
//
//	hcomm run -n 4 -- go run . -listen 127.0.0.1:9464
//	curl -s localhost:9466/metrics | grep hcomm_   # rank 2
//
// or as ranks of one process (one endpoint, a rank label per series):
//
//	go run . -local 4
//
// After its collectives it keeps serving until interrupted (-hold signal),
// until its standard input closes (-hold stdin), or exits (-hold none).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"github.com/hcomm-go/hcomm"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// config is the command line.
type config struct {
	local  int    // ranks in this process; 0: one rank of a launched job
	listen string // the metrics endpoint's address; a non-zero port is increased by the rank
	iters  int    // AllReduces and Broadcasts each
	elems  int    // float32 elements per collective
	hold   string // signal, stdin or none
}

func main() {
	var cfg config
	flag.IntVar(&cfg.local, "local", 0, "run this many ranks in this process (0: one rank of a job started by hcomm run or another launcher)")
	flag.StringVar(&cfg.listen, "listen", "127.0.0.1:9464", "address of the /metrics endpoint; a non-zero port is increased by the rank")
	flag.IntVar(&cfg.iters, "iters", 100, "AllReduces and Broadcasts to run, each")
	flag.IntVar(&cfg.elems, "elems", 1<<16, "float32 elements per collective")
	flag.StringVar(&cfg.hold, "hold", "signal", "after the collectives, keep serving until a signal (signal), until standard input closes (stdin), or exit (none)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "prometheus:", err)
		os.Exit(1)
	}
}

func (cfg config) check() error {
	switch {
	case cfg.local < 0:
		return fmt.Errorf("-local %d: want 0 or more ranks", cfg.local)
	case cfg.iters < 0 || cfg.elems < 0:
		return fmt.Errorf("-iters %d -elems %d: want counts of 0 or more", cfg.iters, cfg.elems)
	case cfg.hold != "signal" && cfg.hold != "stdin" && cfg.hold != "none":
		return fmt.Errorf("-hold %q: want signal, stdin or none", cfg.hold)
	}
	_, _, err := endpoint(cfg.listen, 0)
	return err
}

// endpoint returns the address rank serves on.
func endpoint(listen string, rank int) (string, int, error) {
	host, ps, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("-listen %q: %v", listen, err)
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("-listen %q: bad port", listen)
	}
	if port != 0 {
		port += rank
	}
	return host, port, nil
}

func run(ctx context.Context, cfg config, stdin io.Reader, out io.Writer) error {
	if err := cfg.check(); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	var comms []*hcomm.Comm
	if cfg.local > 0 {
		// One Metrics per rank, routed by the event's rank.
		ms := make([]*Metrics, cfg.local)
		for r := range ms {
			ms[r] = NewMetrics()
			if err := ms[r].Register(reg, prometheus.Labels{"rank": strconv.Itoa(r)}); err != nil {
				return err
			}
		}
		obs := &hcomm.Observer{
			OpEnd:        func(e hcomm.OpEvent) { ms[e.Rank].opEnd(e) },
			BucketLaunch: func(e hcomm.BucketEvent) { ms[e.Rank].bucketLaunch(e) },
			Stream:       func(e hcomm.StreamEvent) { ms[e.Rank].stream(e) },
		}
		cs, err := hcomm.NewLocal(ctx, cfg.local, &hcomm.Config{Observer: obs})
		if err != nil {
			return err
		}
		comms = cs
	} else {
		m := NewMetrics()
		c, err := hcomm.Init(ctx, &hcomm.Config{Observer: m.Observer(nil)})
		if err != nil {
			return err
		}
		rl := prometheus.Labels{"rank": strconv.Itoa(c.Rank())}
		err = m.Register(reg, rl)
		if err == nil {
			// The network paths to the peers (over TCP), read at scrape time.
			err = prometheus.WrapRegistererWith(rl, reg).Register(NewPathCollector(c, "world"))
		}
		if err != nil {
			c.Close()
			return err
		}
		comms = []*hcomm.Comm{c}
	}
	rank := comms[0].Rank()
	host, port, _ := endpoint(cfg.listen, rank)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		for _, c := range comms {
			c.Close()
		}
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	defer func() {
		srv.Close()
		<-served
	}()
	fmt.Fprintf(out, "rank %d: metrics at http://%s/metrics\n", rank, ln.Addr())

	// The communicators stay open while the metrics are served (their
	// paths are read at scrape time), and so that no rank closes while a
	// peer still finishes the last collective.
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = work(ctx, c, cfg)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(out, "rank %d: done: %d AllReduce, %d Broadcast, %d AllReduce on a stream, of %d bytes\n", rank, cfg.iters, cfg.iters, cfg.iters, 4*cfg.elems)
	switch cfg.hold {
	case "signal":
		<-ctx.Done()
	case "stdin":
		io.Copy(io.Discard, stdin)
	}
	return nil
}

// work is one rank's collectives.
func work(ctx context.Context, c *hcomm.Comm, cfg config) error {
	x := make([]float32, cfg.elems)
	for i := range cfg.iters {
		for j := range x {
			x[j] = float32(c.Rank() + i)
		}
		if err := hcomm.AllReduce(ctx, c, x, x, hcomm.Sum); err != nil {
			return err
		}
		if want := float32(c.Size()*(c.Size()-1)/2 + c.Size()*i); len(x) > 0 && x[0] != want {
			return fmt.Errorf("rank %d: AllReduce %d gave %v, want %v", c.Rank(), i, x[0], want)
		}
		if err := hcomm.Broadcast(ctx, c, x, i%c.Size()); err != nil {
			return err
		}
	}
	// The same AllReduces on a stream, after a wait for an event of
	// another stream: the stream metrics' wait and work.
	compute, comm := c.NewStream("compute"), c.NewStream("comm")
	defer compute.Close()
	defer comm.Close()
	for range cfg.iters {
		// The compute stream's work (here it only waits for gate) is
		// still running when comm is told to wait for its end, so every
		// iteration has a wait: a wait for an event already complete
		// would not be enqueued at all.
		gate := make(chan struct{})
		compute.Go(func(context.Context) error { <-gate; return nil })
		ready := compute.Record()
		comm.WaitEvent(ready)
		close(gate)
		if err := hcomm.AllReduceAsync(comm, c, x, x, hcomm.Sum); err != nil {
			return err
		}
	}
	return comm.Synchronize(ctx)
}

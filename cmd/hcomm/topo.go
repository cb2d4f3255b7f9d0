package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/boot"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/settings"
	"github.com/hcomm-go/hcomm/internal/topo"
	"github.com/hcomm-go/hcomm/store"
)

const topoUsage = `usage: hcomm topo [-file FILE] [-sysfs DIR] [-inter GBIT]
       hcomm topo -live STORE

-live prints the network paths of a running job's ranks (bytes, weight,
share, state, RTT and retransmits of each path to each peer), asked
through the job's store (tcp://host:port or file:///dir; the token is
HCOMM_TOKEN's): each process answers with the state it publishes on a
dump request. The ranks are those with an address card in the store;
each rank gets the whole 10 s to answer, and ranks that do not (or that
could not be listed in time) are printed as such and make the command
fail.

Prints the topology a job sees: hosts, NUMA nodes, CPUs, NICs, ranks, the
ring order and the hierarchy the topology-aware algorithms use.

Run alone, it shows this machine as a one-rank job or, with a topology
file (-file, else HCOMM_RANK_TABLE or RANK_TABLE_FILE), the placement the
file describes. Run as a job (hcomm run -n 4 -- hcomm topo), the ranks
exchange what they see through the job's store and rank 0 prints the
joined topology; contradictions between the file and the machines are
errors on every rank.

hcomm's topology format is one statement a line ('#' starts a comment):

  host NAME [ranks LIST | slots N] [group NAME] [nic IF[,IF...]]
  link intra|inter|group SPEED

NAME is a host name, one of its addresses, or any label; LIST is like
"0-3,8"; "slots N" takes the N ranks after the highest rank above; SPEED
is in Gbit/s ("25", "25gbit", "400mbit"). A file that names a host some
rank runs on must put that rank there; ranks sharing a host in the file
must share one in fact.

`

func topoCmd(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("topo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, topoUsage); fs.PrintDefaults() }
	file := fs.String("file", "", "topology file: an HCCL rank table (JSON) or hcomm's format")
	sysfs := fs.String("sysfs", "/", "root of the /sys and /proc trees to read")
	inter := fs.Float64("inter", 0, "inter-host link speed in Gbit/s for the algorithm choice (default: the file's, else the data NIC's, else 10)")
	timeout := fs.Duration("timeout", 60*time.Second, "how long a job's ranks wait for each other")
	live := fs.String("live", "", "store of a running job whose network paths to print")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("topo: unexpected argument %q", fs.Arg(0))
	}
	vals, err := settings.Load(settings.Env)
	if err != nil {
		return err
	}
	if *live != "" {
		return livePaths(context.Background(), stdout, *live, vals.Token)
	}
	if *file == "" {
		*file = vals.RankTable
	}
	var f *topo.File
	if *file != "" {
		var err error
		if f, err = topo.Load(*file); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	rank, size := vals.Rank, vals.Size
	launched := vals.RankErr == nil && vals.RankVars != "" && vals.Store != ""
	if launched {
		// Bind as a rank of the job would (hcomm run --bind-to through
		// --rsh), so the CPUs, and the leaders chosen from them, are the
		// job's.
		if err := topo.BindSelf(vals.BindTo, vals.LocalRank, vals.LocalSize); err != nil {
			return err
		}
	}
	m, err := topo.Probe(os.DirFS(*sysfs))
	if err != nil {
		return err
	}
	cpus, err := topo.AllowedCPUs()
	if err != nil {
		return err
	}
	dataIP := ""
	if launched {
		if u, err := url.Parse(vals.Store); err == nil && u.Scheme == "tcp" {
			_, dataIP, _ = boot.ListenAddress(u.Hostname(), vals.SocketAddr, vals.SocketIfname)
			dataIP, _, _ = strings.Cut(dataIP, ",") // the first path
		}
	}
	me := topo.NewCard(m, boot.HostID(vals.Hostname), cpus, dataIP, topo.InterfaceAddrs())
	if launched {
		me.PID = os.Getpid()
	}
	if f != nil {
		me.File = f.Digest
	}
	var cards []topo.Card
	switch {
	case launched:
		st, err := store.Open(ctx, vals.Store, vals.Token)
		if err != nil {
			return fmt.Errorf("topo: store: %w", err)
		}
		defer st.Close()
		if cards, err = topo.Exchange(ctx, store.WithPrefix(st, "hcomm-topo"), rank, size, me); err != nil {
			return err
		}
	case f != nil:
		// No job: show the file's placement as if every rank ran where
		// the file says, this machine's view standing in for each host.
		cards = fileCards(me, f)
	default:
		cards = []topo.Card{me}
	}
	t, err := topo.Build(cards, f)
	if err != nil {
		return err
	}
	if launched {
		// As a rank would where hosts share a machine (HCOMM_BIND_TO=auto).
		topo.SpreadSelf(t, vals.BindTo, rank, me, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	}
	if rank != 0 {
		return nil
	}
	printTopo(stdout, t, *inter)
	return nil
}

// fileCards makes one card per rank of f, each on the file's host.
func fileCards(me topo.Card, f *topo.File) []topo.Card {
	n := 0
	for _, h := range f.Hosts {
		n += len(h.Ranks)
	}
	cards := make([]topo.Card, n)
	for _, h := range f.Hosts {
		for _, r := range h.Ranks {
			c := me
			c.Host, c.Hostname, c.Addrs = h.Name, h.Name, nil
			if ip, ok := f.DeviceIP[r]; ok {
				c.Addrs = []string{ip}
			}
			cards[r] = c
		}
	}
	return cards
}

// printTopo prints the topology and what the topology-aware algorithms
// make of it.
func printTopo(w io.Writer, t *topo.Topology, interGbit float64) {
	t.Format(w)
	l := algo.Layout{Hosts: t.HostRanks()}
	if len(l.Hosts) > 1 {
		fmt.Fprintln(w, "hierarchy (hier): intra-host ring reduce-scatter, inter-host rings per rail, intra-host allgather")
		for j, owners := range l.Rails() {
			fmt.Fprintf(w, "  rail %d: ranks %s\n", j, strings.Trim(fmt.Sprint(owners), "[]"))
		}
	}
	if interGbit <= 0 {
		interGbit = t.InterGbps()
	}
	if interGbit <= 0 {
		interGbit = 10
	}
	fmt.Fprintf(w, "allreduce choice (inter-host %g Gbit/s):", interGbit)
	for _, b := range []float64{8, 64 << 10, 1 << 20, 16 << 20, 256 << 20} {
		fmt.Fprintf(w, " %s=%s", sizeName(b), plannerChoice(l, b, interGbit, t.Crowd()))
	}
	fmt.Fprintln(w)
}

// plannerChoice returns the AllReduce the planner picks for a float32
// vector of bytes bytes on layout l with inter-host links of interGbit
// and crowd ranks per CPU on the most crowded kernel: a communicator of
// one host is costed with the memory model, one across hosts with the
// network model and the inter-host link.
func plannerChoice(l algo.Layout, bytes, interGbit, crowd float64) string {
	n := 0
	for _, h := range l.Hosts {
		n += len(h)
	}
	m := plan.MemoryModel
	if len(l.Hosts) > 1 {
		m = plan.NetworkModel
	}
	p := plan.New(0, n, m, nil)
	if err := p.SetLayout(l); err != nil {
		return "?"
	}
	p.SetCrowd(crowd)
	if len(l.Hosts) > 1 {
		p.SetInterLink(algo.Link{Alpha: plan.NetworkModel.Alpha, Beta: 8 / (interGbit * 1e9)})
	}
	a, err := p.Choose(sched.Uniform(sched.AllReduce, n, max(int(bytes)/4, 1), 0, false), 4)
	if err != nil {
		return "?"
	}
	return a.Name
}

func sizeName(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%gM", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%gK", b/(1<<10))
	}
	return fmt.Sprintf("%gB", b)
}

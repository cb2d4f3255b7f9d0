// Package world joins this process to its job for Init: it opens the job,
// connects the world communicator's transport and gives its planner what
// the topology says — how the ranks sit on hosts and the cost of the
// links between them — and the CPUs its polling goroutines run on.
package world

import (
	"context"
	"log/slog"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/boot"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/settings"
	"github.com/hcomm-go/hcomm/internal/topo"
	"github.com/hcomm-go/hcomm/internal/transport"
)

// World is the world communicator's parts, made by Join.
type World struct {
	Job       *boot.Job
	Transport transport.Transport
	// Model is the planner's: shared memory when every peer is on this
	// host, else the network's, with the link between hosts when it was
	// calibrated.
	Model plan.Model
	// Hosts lists the ranks of each host; nil with HCOMM_TOPOLOGY=off.
	Hosts [][]int
	// Inter is the cost of a message between hosts, when the ranks span
	// hosts and the topology file or the NICs give their speed.
	Inter *algo.Link
	// Crowd is the most ranks per CPU on a kernel of the job
	// (topo.Topology.Crowd), 0 when unknown.
	Crowd    float64
	PollCPUs []int // where the executor's workers are pinned (HCOMM_CPU_AFFINITY), nil for anywhere
}

// Join opens the job jc describes and connects the world communicator,
// with the topology settings of v (HCOMM_TOPOLOGY, HCOMM_RANK_TABLE,
// HCOMM_CPU_AFFINITY). On error it leaves nothing open.
func Join(ctx context.Context, jc boot.JobConfig, v settings.Values, log *slog.Logger) (*World, error) {
	j, err := boot.OpenJob(ctx, jc)
	if err != nil {
		return nil, err
	}
	t, remote, err := j.Connect(ctx, "world", jc.Rank, jc.Size)
	if err != nil {
		j.Close()
		return nil, err
	}
	w := &World{Job: j, Transport: t, Model: plan.MemoryModel}
	if remote {
		w.Model = plan.NetworkModel
	}
	card := topo.DiscoverCard(jc.Options.Host, jc.Options.AdvertiseHost, log)
	var tp *topo.Topology
	if v.Topology != "off" {
		tp, err = topo.Join(ctx, j.Store(), jc.Rank, jc.Size, v.RankTable, card, log)
	}
	if tp != nil {
		// Ranks of hosts that share a machine take their share of its
		// CPUs (HCOMM_BIND_TO=auto) before the leaders are chosen.
		card = topo.SpreadSelf(tp, v.BindTo, jc.Rank, card, log)
		w.Hosts = tp.HostRanks()
		w.Crowd = tp.Crowd()
		if l, ok := plan.HostLink(tp.Links.Inter, tp.InterGbps()); ok && remote && len(w.Hosts) > 1 {
			// Calibrated from the links: flat algorithms are costed
			// with it too, here and in communicators split off.
			w.Inter = &l
			w.Model.Alpha, w.Model.Beta = l.Alpha, l.Beta
		}
	}
	if err == nil {
		w.PollCPUs, err = topo.PollCPUsFor(v.CPUAffinity, card)
	}
	if err != nil {
		t.Close()
		j.Close()
		return nil, err
	}
	return w, nil
}

// Plan gives p, the world communicator's planner, the layout and the link
// between hosts.
func (w *World) Plan(p *plan.Planner) error {
	if w.Hosts == nil {
		return nil
	}
	if err := p.SetLayout(algo.Layout{Hosts: w.Hosts}); err != nil {
		return err
	}
	if w.Inter != nil {
		p.SetInterLink(*w.Inter)
	}
	p.SetCrowd(w.Crowd)
	return nil
}

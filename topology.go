package hcomm

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/boot"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/topo"
	"github.com/hcomm-go/hcomm/store"
)

// topologySettings are HCOMM_TOPOLOGY (off), HCOMM_RANK_TABLE (file) and
// HCOMM_CPU_AFFINITY (affinity).
type topologySettings struct {
	off      bool
	file     string
	affinity string
}

// discover reads this rank's topology card. Discovery is best effort: the
// host identity is what the layout needs.
func discover(jc boot.JobConfig, log *slog.Logger) topo.Card {
	host := jc.Options.Host
	card, err := topo.Discover(host, firstPath(jc.Options.AdvertiseHost))
	if err != nil {
		log.Warn("hcomm: topology discovery failed; using the host identity only", "err", err)
		card = topo.Card{Host: host, NUMA: -1}
	}
	return card
}

// bindSelf binds every thread of this process under HCOMM_BIND_TO
// (policy), which hcomm run --bind-to sets on the ranks it starts through
// --rsh, since binding the rsh command does not reach a rank on another
// machine: the CPUs are topo.Bind's for the rank's local rank and the
// host's local size, on this machine's CPUs.
func bindSelf(policy string, localRank, localSize int) error {
	if policy == "" || policy == topo.BindNone {
		return nil
	}
	if localRank < 0 || localSize < 1 || localRank >= localSize {
		return invalid("HCOMM_BIND_TO=%s needs HCOMM_LOCAL_RANK and HCOMM_LOCAL_SIZE (local rank %d of %d)", policy, localRank, localSize)
	}
	m, err := topo.Probe(topo.System())
	if err != nil {
		return fmt.Errorf("HCOMM_BIND_TO: %w", err)
	}
	allowed, err := topo.AllowedCPUs()
	if err != nil {
		return fmt.Errorf("HCOMM_BIND_TO: %w", err)
	}
	cpus, err := topo.Bind(policy, m, allowed, localRank, localSize)
	if err != nil {
		return invalid("HCOMM_BIND_TO=%s: %v", policy, err)
	}
	return topo.BindProcess(cpus)
}

// pollCPUs returns the CPUs the executor's workers are pinned to under
// HCOMM_CPU_AFFINITY (spec), nil for none.
func pollCPUs(spec string, card topo.Card) ([]int, error) {
	p, err := topo.ParsePoll(spec)
	if err != nil {
		return nil, invalid("HCOMM_CPU_AFFINITY=%q: %v", spec, err)
	}
	cpus, err := p.PollCPUs(card)
	if err != nil {
		return nil, invalid("%v", err)
	}
	return cpus, nil
}

// worldLayout exchanges the ranks' topology cards through the store (one
// Set and one Get per rank), joins them with the topology file if one is
// named, and returns how the ranks sit on hosts, or nil with
// HCOMM_TOPOLOGY=off. Every rank publishes its card even when its own
// discovery or file failed, so that a bad file is an error on every rank
// rather than a hang on the others.
func worldLayout(ctx context.Context, st store.Store, jc boot.JobConfig, ts topologySettings, card topo.Card, log *slog.Logger) (*algo.Layout, *topo.Topology, error) {
	if ts.off {
		return nil, nil, nil
	}
	var f *topo.File
	var fileErr error
	if ts.file != "" {
		if f, fileErr = topo.Load(ts.file); fileErr != nil {
			card.File = "unreadable"
		} else {
			card.File = f.Digest
		}
	}
	cards, err := topo.Exchange(ctx, store.WithPrefix(st, "hcomm/world"), jc.Rank, jc.Size, card)
	if err != nil {
		return nil, nil, err
	}
	if fileErr != nil {
		return nil, nil, fmt.Errorf("%w (HCOMM_RANK_TABLE)", fileErr)
	}
	t, err := topo.Build(cards, f)
	if err != nil {
		return nil, nil, invalid("%v", err)
	}
	l := &algo.Layout{Hosts: t.HostRanks()}
	if log.Enabled(ctx, slog.LevelDebug) {
		var b strings.Builder
		t.Format(&b)
		log.Debug("hcomm: topology", "rank", jc.Rank, "topology", b.String())
	}
	return l, t, nil
}

// interLink is the cost of a message between hosts of t: the default
// network model's, slowed to the speed of the links between hosts — the
// topology file's inter-host link speed as given, else the slowest data
// NIC's, which cannot make the model faster than the default (TCP seldom
// fills a fast NIC). It reports false when neither is known.
func interLink(t *topo.Topology) (algo.Link, bool) {
	l := algo.Link{Alpha: plan.NetworkModel.Alpha, Beta: plan.NetworkModel.Beta}
	switch g := t.InterGbps(); {
	case t.Links.Inter > 0:
		l.Beta = 8 / (t.Links.Inter * 1e9)
	case g > 0:
		l.Beta = max(l.Beta, 8/(g*1e9))
	default:
		return l, false
	}
	return l, true
}

// subLayout returns the layout of a communicator split from one of layout
// l: parents[i] is the parent's rank of the new communicator's rank i.
func subLayout(l algo.Layout, parents []int) algo.Layout {
	sub := map[int]int{}
	for i, r := range parents {
		sub[r] = i
	}
	var out algo.Layout
	for _, rs := range l.Hosts {
		var h []int
		for _, r := range rs {
			if i, ok := sub[r]; ok {
				h = append(h, i)
			}
		}
		if len(h) > 0 {
			out.Hosts = append(out.Hosts, h)
		}
	}
	return out
}

// firstPath returns the first of a comma-separated list of addresses: the
// path the data socket is reached on first.
func firstPath(addrs string) string {
	first, _, _ := strings.Cut(addrs, ",")
	return first
}

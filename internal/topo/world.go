package topo

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"

	"github.com/hcomm-go/hcomm/internal/errs"
	"github.com/hcomm-go/hcomm/store"
)

// What Init does with the topology: bind the process, read its card,
// exchange the cards and join them with the topology file, and choose the
// polling goroutines' CPUs. Argument errors are errs.ErrInvalidArgument.

// DiscoverCard reads this rank's card on host, whose data socket is
// advertised at addrs (comma-separated, one per network path; the first
// is the one reached first). Discovery is best effort: on failure it
// warns and returns a card with the host identity only, which is what
// the layout needs.
func DiscoverCard(host, addrs string, log *slog.Logger) Card {
	first, _, _ := strings.Cut(addrs, ",")
	card, err := Discover(host, first)
	if err != nil {
		log.Warn("hcomm: topology discovery failed; using the host identity only", "err", err)
		card = Card{Host: host, NUMA: -1}
	}
	return card
}

// BindSelf binds every thread of this process under HCOMM_BIND_TO
// (policy), which hcomm run --bind-to sets on the ranks it starts through
// --rsh, since binding the rsh command does not reach a rank on another
// machine: the CPUs are Bind's for the rank's local rank and the host's
// local size, on this machine's CPUs. Unless the program chose its
// GOMAXPROCS (the GOMAXPROCS variable or runtime.GOMAXPROCS), GOMAXPROCS
// then follows the new mask: the runtime reads the mask once at start, and
// a process bound to one CPU that keeps two Ps hands its goroutines
// between threads on that CPU (an 8-byte AllReduce on 2 namespaces × 2
// ranks bound by core took 80–117 µs instead of 26–31). Under auto (or
// "") and none it does nothing: auto binds after the ranks have met
// (SpreadSelf).
func BindSelf(policy string, localRank, localSize int) error {
	if policy == "" || policy == BindNone || policy == BindAuto {
		return nil
	}
	if localRank < 0 || localSize < 1 || localRank >= localSize {
		return errs.Invalid("HCOMM_BIND_TO=%s needs HCOMM_LOCAL_RANK and HCOMM_LOCAL_SIZE (local rank %d of %d)", policy, localRank, localSize)
	}
	m, err := Probe(System())
	if err != nil {
		return fmt.Errorf("HCOMM_BIND_TO: %w", err)
	}
	allowed, err := AllowedCPUs()
	if err != nil {
		return fmt.Errorf("HCOMM_BIND_TO: %w", err)
	}
	cpus, err := Bind(policy, m, allowed, localRank, localSize)
	if err != nil {
		return errs.Invalid("HCOMM_BIND_TO=%s: %v", policy, err)
	}
	return BindCPUs(cpus)
}

// BindCPUs binds every thread of this process to cpus and, unless the
// program chose its GOMAXPROCS (the GOMAXPROCS variable or
// runtime.GOMAXPROCS), sets GOMAXPROCS to the runtime's default for the
// new mask.
func BindCPUs(cpus []int) error {
	// Whether the program set GOMAXPROCS: it differs from the default
	// (which runtime.SetDefaultGOMAXPROCS computes, ignoring the variable).
	cur := runtime.GOMAXPROCS(0)
	runtime.SetDefaultGOMAXPROCS()
	chosen := runtime.GOMAXPROCS(0) != cur
	if chosen {
		runtime.GOMAXPROCS(cur)
	}
	if err := BindProcess(cpus); err != nil {
		return err
	}
	if !chosen {
		runtime.SetDefaultGOMAXPROCS() // the default for the bound mask
	}
	return nil
}

// SpreadSelf binds this process, rank self of t, to the CPUs
// Topology.SpreadShared deals it under HCOMM_BIND_TO=policy ("" or auto;
// any other policy leaves it alone) and returns card with those CPUs;
// card unchanged when the rank is not dealt any. A binding that fails is
// warned about on log, and the rank runs where it was.
func SpreadSelf(t *Topology, policy string, self int, card Card, log *slog.Logger) Card {
	if t == nil || (policy != "" && policy != BindAuto) {
		return card
	}
	cpus := t.SpreadShared(self)
	if cpus == nil {
		return card
	}
	if err := BindCPUs(cpus); err != nil {
		log.Warn("hcomm: cannot bind to this rank's share of the CPUs its machine's hosts share", "cpus", FormatCPUList(cpus), "err", err)
		return card
	}
	log.Info("hcomm: hosts of this job share this machine: rank bound to its share of the CPUs (HCOMM_BIND_TO=none leaves it unbound)",
		"rank", self, "cpus", FormatCPUList(cpus))
	card.CPUs = cpus
	card.NUMA = NodeOf(card.Nodes, cpus)
	return card
}

// PollCPUsFor returns the CPUs the executor's workers are pinned to under
// HCOMM_CPU_AFFINITY (spec) for a rank whose card is card, nil for none.
func PollCPUsFor(spec string, card Card) ([]int, error) {
	p, err := ParsePoll(spec)
	if err != nil {
		return nil, errs.Invalid("HCOMM_CPU_AFFINITY=%q: %v", spec, err)
	}
	cpus, err := p.PollCPUs(card)
	if err != nil {
		return nil, errs.Invalid("%v", err)
	}
	return cpus, nil
}

// Join exchanges the ranks' cards through st (one Set and one Get per
// rank, under the world communicator's prefix), joins them with the
// topology file (HCOMM_RANK_TABLE) if one is named, and returns the job's
// topology. Every rank publishes its card even when its own file failed,
// so that a bad file is an error on every rank rather than a hang on the
// others.
func Join(ctx context.Context, st store.Store, rank, size int, file string, card Card, log *slog.Logger) (*Topology, error) {
	var f *File
	var fileErr error
	if file != "" {
		if f, fileErr = Load(file); fileErr != nil {
			card.File = "unreadable"
		} else {
			card.File = f.Digest
		}
	}
	cards, err := Exchange(ctx, store.WithPrefix(st, "hcomm/world"), rank, size, card)
	if err != nil {
		return nil, err
	}
	if fileErr != nil {
		return nil, fmt.Errorf("%w (HCOMM_RANK_TABLE)", fileErr)
	}
	t, err := Build(cards, f)
	if err != nil {
		return nil, errs.Invalid("%v", err)
	}
	if log.Enabled(ctx, slog.LevelDebug) {
		var b strings.Builder
		t.Format(&b)
		log.Debug("hcomm: topology", "rank", rank, "topology", b.String())
	}
	return t, nil
}

// Pinner returns the function that pins a polling goroutine to cpus
// (HCOMM_CPU_AFFINITY's), warning on log when it cannot; nil for no cpus.
func Pinner(cpus []int, log *slog.Logger) func() {
	if len(cpus) == 0 {
		return nil
	}
	return func() {
		if err := Pin(cpus); err != nil {
			log.Warn("hcomm: cannot pin a polling goroutine", "cpus", FormatCPUList(cpus), "err", err)
		}
	}
}

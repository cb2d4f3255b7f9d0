package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/sched"
	"github.com/hcomm-go/hcomm/internal/topo"
)

// Link is the cost of one message over one class of link: a chunk of b
// bytes takes Alpha + b·Beta seconds once it has the resources it needs.
type Link struct {
	Alpha float64 `json:"alpha"` // seconds per message (chunk)
	Beta  float64 `json:"beta"`  // seconds per byte of one flow
}

// Topology is the machine model: hosts of RanksPerHost ranks (rank r lives
// on host r/RanksPerHost), hosts grouped in racks of HostsPerRack, three
// link classes (shared memory inside a host, the network inside a rack,
// the network across racks) and the shared resources flows contend for.
//
// The zero value of every field means its default (see Default); a
// topology file is this struct as JSON, any field left out taking its
// default.
type Topology struct {
	Name string `json:"name,omitempty"`
	// Ranks is the number of ranks a topology file placed (0: any).
	Ranks int `json:"-"`
	// hostOf and groupOf place ranks on hosts and hosts in groups when a
	// topology file's placement is not the regular one (rank r on host
	// r/RanksPerHost, host h in rack h/HostsPerRack); nil otherwise.
	hostOf, groupOf []int32
	// groupWake is SHMWake as it applies to a group call (set by
	// oversubscription).
	groupWake float64
	// netWake is NetWake as it applies to n ranks (set by
	// oversubscription).
	netWake float64

	RanksPerHost int `json:"ranks_per_host,omitempty"`
	// HostsPerRack groups hosts into racks; 0 puts every host in one
	// rack (no rack uplinks).
	HostsPerRack int `json:"hosts_per_rack,omitempty"`
	// Cores is the number of CPU cores of a host that copy through shared
	// memory and reduce: an intra-host chunk occupies a core for b·SHM.Beta
	// seconds and a reduction for b·Gamma (0: RanksPerHost, one per rank).
	// With HostsPerMachine, the cores of a machine, shared by its hosts.
	Cores int `json:"cores,omitempty"`
	// HostsPerMachine groups hosts that run on one machine's Cores:
	// network namespaces on one kernel, as scripts/simval/measure_tcp.sh's
	// test bed, each a host with its own (shaped) link but all sharing the
	// machine's CPUs, so that one host's CPU work (copies, reductions,
	// NetCPU) queues behind another's. 0 or 1: every host has its own
	// cores.
	HostsPerMachine int `json:"hosts_per_machine,omitempty"`

	SHM  Link `json:"shm"`  // between ranks of one host
	Net  Link `json:"net"`  // between hosts of one rack
	Rack Link `json:"rack"` // between racks

	// MemBW is a host's memory bandwidth (bytes/s) shared by its
	// intra-host flows.
	MemBW float64 `json:"mem_bw,omitempty"`
	// NICBW is a host's network bandwidth (bytes/s) in each direction,
	// shared by the flows leaving (entering) the host.
	NICBW float64 `json:"nic_bw,omitempty"`
	// NICRxBW, if set, is a host's receive bandwidth when it differs from
	// NICBW (a test bed shaping only egress, as tc tbf on a veth does).
	NICRxBW float64 `json:"nic_rx_bw,omitempty"`
	// NICBurst, if set, makes a host's sending side a token bucket (as tc
	// tbf shapes a link): bytes covered by tokens leave at NICLineBW, the
	// rest at NICBW, tokens refilling at NICBW up to NICBurst bytes. The
	// buckets start empty (links in steady use).
	NICBurst  int64   `json:"nic_burst,omitempty"`
	NICLineBW float64 `json:"nic_line_bw,omitempty"`
	// UplinkBW is a rack's bandwidth to the rest of the network
	// (bytes/s) in each direction, shared by the flows leaving
	// (entering) the rack; below HostsPerRack·NICBW the network is
	// oversubscribed.
	UplinkBW float64 `json:"uplink_bw,omitempty"`

	// Gamma is the time to reduce one byte (seconds).
	Gamma float64 `json:"gamma,omitempty"`
	// CopyBeta is the time of a local copy per byte (seconds).
	CopyBeta float64 `json:"copy_beta,omitempty"`
	// CacheBytes is a host's last-level cache: when what a collective's
	// ranks on one host touch — their buffers (in and out) and the
	// shared-memory rings they send through (ringSlots positions of up to
	// a message each per directed pair) — is smaller, shared-memory copies
	// and reductions cost CacheFactor times their β and γ, and memory
	// time as much (0: no cache effect). What a host can keep there is
	// less than its last-level cache's size: Local uses 24 MiB of 32.
	CacheBytes  int64   `json:"cache_bytes,omitempty"`
	CacheFactor float64 `json:"cache_factor,omitempty"`
	// SHMSwitch applies when a host runs more ranks than Cores: every
	// shared-memory chunk then also costs this much CPU time on a core of
	// the host (seconds), its latency growing by as much — a rank must be
	// scheduled in to see a chunk or free its slot, a context switch
	// (LogP's o on a shared core). Since it holds a core, it grows with
	// the ranks sharing each core. 0: none.
	SHMSwitch float64 `json:"shm_switch,omitempty"`
	// SHMWake applies when a host runs more ranks than Cores: a rank that
	// waited for a shared-memory chunk (or a peer's slot) sees it only
	// once it is scheduled again, after the other ranks took their turns
	// polling and yielding. A wait of a schedule's op grows by SHMWake for
	// every other rank on the waiting rank's core (ceil(ranks/cores) − 1,
	// the most crowded host's): ranks copying on the other cores meanwhile
	// do not delay it. A group call, which waits for every rank of the
	// host, grows by SHMWake for every other rank per core
	// ((ranks − 1)/cores). 0: none.
	SHMWake float64 `json:"shm_wake,omitempty"`
	// SlotWake, if set, is SHMWake as a group call pays it (per other rank
	// per core): a rank waiting on the slots waits for the turns of ranks
	// that each write a slot and then read and reduce every slot it
	// needs, longer turns than those of ranks polling for one message.
	// 0: SHMWake.
	SlotWake float64 `json:"slot_wake,omitempty"`
	// SlotAlpha is the latency of a group call through the shared
	// segment's slots (internal/transport/shm: small collectives of ranks
	// all on one host, see Slots): a rank writes its slot and reads those
	// it needs, which arrive in parallel. 0: SHM.Alpha.
	SlotAlpha float64 `json:"slot_alpha,omitempty"`
	// SHMCoreShare is the fraction of a shared-memory chunk's b·β during
	// which it holds a core; the rest (waiting on memory and on the peer)
	// leaves the core to other ranks, which matters only when ranks
	// outnumber cores. 0 means 1: the whole copy holds a core.
	SHMCoreShare float64 `json:"shm_core_share,omitempty"`
	// SHMMemShare is the fraction of MemBW a host gets while it runs more
	// ranks than Cores and what they touch does not fit in CacheBytes.
	// Its copies still share the memory as any host's do (one FIFO server
	// of MemBW), but ranks taking turns on a core evict each other's
	// buffers and ring slots from the caches between their turns, so the
	// same bytes cost more memory traffic; when all of it fits, nothing is
	// evicted. 0 means 1.
	SHMMemShare float64 `json:"shm_mem_share,omitempty"`
	// SHMTurnCache is CacheFactor for a host running more ranks than
	// Cores: when what its ranks touch fits CacheBytes, their copies and
	// reductions cost this factor of their uncached time instead. A core's
	// own caches (L1, L2) hold one rank's data at a time: a rank taking
	// its turn finds what it last touched evicted by the ranks that ran
	// between, so less of the cache's speed-up is left. 0: CacheFactor.
	SHMTurnCache float64 `json:"shm_turn_cache,omitempty"`
	// NetCPU is the CPU time a network message (a chunk) costs on a core
	// of its sender's host (its machine's, with HostsPerMachine): the
	// system calls and the kernel's protocol work, which over a veth pair
	// includes delivering it into the receiving namespace. It queues
	// behind the other work of those cores (other ranks' sends, copies,
	// reductions), so ranks outnumbering the cores take turns, and the
	// chunk leaves when it is done: on idle cores it is part of the
	// message's latency, beside Net.Alpha (and Rack.Alpha). 0: none.
	NetCPU float64 `json:"net_cpu,omitempty"`
	// NetWake applies when a machine runs more ranks than its cores (its
	// hosts' ranks, with HostsPerMachine): a rank that waited for a
	// network message sees it this much later for every other rank on a
	// core of its machine (ceil(ranks/cores) − 1): it must be scheduled
	// again, after the ranks sharing its core (polling for their own
	// messages) took their turns. It shows on chains of messages, where
	// each hop waits (ring AllReduce of a few bytes, whose empty blocks
	// leave one chain; a tree's levels), and hardly where every rank
	// sends at once and the cores' queue (NetCPU) sets the time. 0: none.
	NetWake float64 `json:"net_wake,omitempty"`
	// SHMEager and NetEager are the largest sends the transports buffer
	// (transport.Eager: the shared-memory ring's slot, TCP's eager limit):
	// a send of one chunk no larger completes for the sender as soon as the
	// resources it crosses are free, without waiting for its arrival.
	SHMEager int64 `json:"shm_eager,omitempty"`
	NetEager int64 `json:"net_eager,omitempty"`
	// ChunkBytes is the executor's chunk size (internal/exec); 0 means
	// exec.DefaultChunkBytes.
	ChunkBytes int `json:"chunk_bytes,omitempty"`
}

// Default is the model used when no file is given: 8 ranks per host, 32
// hosts per rack with 2:1 oversubscribed uplinks, 100 Gb/s NICs, shared
// memory at about 10 GB/s per flow.
func Default() Topology {
	return Topology{
		Name:         "default",
		RanksPerHost: 8,
		HostsPerRack: 32,
		SHM:          Link{Alpha: 2e-6, Beta: 1 / 10e9},
		Net:          Link{Alpha: 10e-6, Beta: 1 / 12.5e9},
		Rack:         Link{Alpha: 15e-6, Beta: 1 / 12.5e9},
		MemBW:        40e9,
		NICBW:        12.5e9,
		UplinkBW:     32 * 12.5e9 / 2,
		Gamma:        1 / 8e9,
		CopyBeta:     1 / 10e9,
		SHMEager:     256 << 10,
		NetEager:     16 << 10,
	}
}

// Local is a model of this kind of machine running every rank on one
// host over shared memory: two cores shared by all ranks, its terms fitted
// by scripts/simval to `hcomm perf -transport shm` on an idle 2-core
// virtual machine (the idle runs of main at a15e7b9, kept in
// scripts/simval/testdata/shm-idle3; BENCHMARKS.md), each set on its own
// measurements, none on the 4- and 8-rank runs that validate it. On 2
// ranks' AllReduce and AllGather schedules: 0.5 µs per chunk, 0.1 ns per
// byte copied, 0.075 ns per byte reduced, 14 GB/s of memory bandwidth, 0.5
// times the byte costs (and memory time) when a host's buffers and rings
// fit in 24 MiB of its 32 MiB last-level cache (the 2-rank AllGather at
// 8 MiB, 24 MiB with its rings, runs at memory speed). On 2 ranks' group
// calls: a slot α of 0.2 µs. On 2, 3 and 4 ranks confined to one core and
// 3 ranks on two (more ranks than cores): a switch of 0.5 µs per chunk, a
// copy occupying a core for all of its b·β, 0.7 of the memory bandwidth
// beyond the cache and 0.7 (not 0.5) of the uncached byte costs within it
// (the ranks taking turns on a core evict its own caches; shm-idle4's own
// fit finds 0.7 as well), and a wake of 2 µs per other rank on a waiting
// rank's core (per other rank per core for a group call).
func Local() Topology {
	t := Default()
	t.Name = "local"
	t.RanksPerHost = 1 << 20
	t.HostsPerRack = 0
	t.Cores = 2
	t.SHM = Link{Alpha: 0.5e-6, Beta: 0.1e-9}
	t.MemBW = 14e9
	t.Gamma = 0.075e-9
	t.CopyBeta = 0.075e-9
	t.CacheBytes = 24 << 20
	t.CacheFactor = 0.5
	t.SlotAlpha = 0.2e-6
	t.SHMSwitch = 0.5e-6
	t.SHMCoreShare = 1
	t.SHMMemShare = 0.7
	t.SHMTurnCache = 0.7
	t.SHMWake = 2e-6
	return t
}

// Preset returns a named built-in topology: "default" or "local".
func Preset(name string) (Topology, bool) {
	switch name {
	case "", "default":
		return Default(), true
	case "local":
		return Local(), true
	}
	return Topology{}, false
}

// Load reads a topology from a preset name, a JSON file of this struct
// (fields left out take Default's values) or a topology file of
// internal/topo (hcomm's own format or an HCCL rank table; see FromFile).
func Load(nameOrFile string) (Topology, error) {
	if t, ok := Preset(nameOrFile); ok {
		return t, nil
	}
	b, err := os.ReadFile(nameOrFile)
	if err != nil {
		return Topology{}, fmt.Errorf("sim: topology: %w", err)
	}
	t, err := Read(bytes.NewReader(b))
	if err == nil {
		return t, nil
	}
	f, ferr := topo.Parse(nameOrFile, b)
	if ferr != nil {
		if len(bytes.TrimSpace(b)) > 0 && bytes.TrimSpace(b)[0] == '{' {
			return Topology{}, fmt.Errorf("%w (nor a rank table: %v)", err, ferr)
		}
		return Topology{}, fmt.Errorf("sim: %v", ferr)
	}
	return FromFile(f, Default())
}

// Read decodes a topology file (JSON, unknown fields rejected) over
// Default's values and checks it.
func Read(r io.Reader) (Topology, error) {
	t := Default()
	t.Name = ""
	d := json.NewDecoder(io.LimitReader(r, 1<<20))
	d.DisallowUnknownFields()
	if err := d.Decode(&t); err != nil {
		return Topology{}, fmt.Errorf("sim: topology: %w", err)
	}
	if err := t.Check(); err != nil {
		return Topology{}, err
	}
	return t, nil
}

// Check reports a topology that cannot be simulated.
func (t Topology) Check() error {
	var errs []error
	if t.RanksPerHost < 1 {
		errs = append(errs, fmt.Errorf("ranks_per_host %d < 1", t.RanksPerHost))
	}
	if t.HostsPerRack < 0 || t.Cores < 0 || t.ChunkBytes < 0 || t.SHMEager < 0 || t.NetEager < 0 || t.HostsPerMachine < 0 {
		errs = append(errs, errors.New("negative hosts_per_rack, cores, chunk_bytes, shm_eager, net_eager or hosts_per_machine"))
	}
	if !(t.NetCPU >= 0) || t.NetCPU > 1 {
		errs = append(errs, fmt.Errorf("net_cpu %g s out of range", t.NetCPU))
	}
	for _, l := range []struct {
		name string
		l    Link
	}{{"shm", t.SHM}, {"net", t.Net}, {"rack", t.Rack}} {
		if !(l.l.Alpha >= 0 && l.l.Beta >= 0) || l.l.Alpha > 1 || l.l.Beta > 1 {
			errs = append(errs, fmt.Errorf("%s: alpha %g, beta %g out of range", l.name, l.l.Alpha, l.l.Beta))
		}
	}
	for _, v := range []struct {
		name string
		v    float64
	}{{"mem_bw", t.MemBW}, {"nic_bw", t.NICBW}, {"uplink_bw", t.UplinkBW}} {
		if !(v.v > 0) || v.v > 1e18 {
			errs = append(errs, fmt.Errorf("%s %g must be positive", v.name, v.v))
		}
	}
	if !(t.NICRxBW >= 0) || t.NICRxBW > 1e18 {
		errs = append(errs, fmt.Errorf("nic_rx_bw %g out of range", t.NICRxBW))
	}
	if t.NICBurst < 0 || t.NICBurst > 0 && !(t.NICLineBW >= t.NICBW && t.NICLineBW <= 1e18) {
		errs = append(errs, fmt.Errorf("nic_burst %d needs nic_line_bw (%g) at least nic_bw", t.NICBurst, t.NICLineBW))
	}
	if !(t.SHMSwitch >= 0) || t.SHMSwitch > 1 || !(t.SHMCoreShare >= 0) || t.SHMCoreShare > 1 || !(t.SHMMemShare >= 0) || t.SHMMemShare > 1 || !(t.SHMTurnCache >= 0) || t.SHMTurnCache > 1 ||
		!(t.SHMWake >= 0) || t.SHMWake > 1 || !(t.SlotWake >= 0) || t.SlotWake > 1 || !(t.SlotAlpha >= 0) || t.SlotAlpha > 1 || !(t.NetWake >= 0) || t.NetWake > 1 {
		errs = append(errs, fmt.Errorf("shm_switch %g s, shm_core_share %g, shm_mem_share %g, shm_turn_cache %g, shm_wake %g s, slot_wake %g s, slot_alpha %g s, net_wake %g s out of range",
			t.SHMSwitch, t.SHMCoreShare, t.SHMMemShare, t.SHMTurnCache, t.SHMWake, t.SlotWake, t.SlotAlpha, t.NetWake))
	}
	if t.CacheBytes < 0 || !(t.CacheFactor >= 0) || t.CacheFactor > 1 {
		errs = append(errs, fmt.Errorf("cache_bytes %d, cache_factor %g out of range", t.CacheBytes, t.CacheFactor))
	}
	if !(t.Gamma >= 0 && t.CopyBeta >= 0) || t.Gamma > 1 || t.CopyBeta > 1 {
		errs = append(errs, fmt.Errorf("gamma %g, copy_beta %g out of range", t.Gamma, t.CopyBeta))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sim: topology: %w", err)
	}
	return nil
}

func (t Topology) rxBW() float64 {
	if t.NICRxBW > 0 {
		return t.NICRxBW
	}
	return t.NICBW
}

// oversubscribed reports whether some host of n ranks runs more ranks
// than it has cores.
func (t Topology) oversubscribed(n int) bool { return t.perCore(n) > 1 }

// perCore returns the ranks per core of the most crowded host of n ranks.
func (t Topology) perCore(n int) float64 { return float64(t.most(n)) / float64(t.cores()) }

// most returns the ranks of the most crowded host of n ranks.
func (t Topology) most(n int) int {
	most := min(n, t.RanksPerHost)
	if t.hostOf != nil {
		per := map[int32]int{}
		for _, h := range t.hostOf {
			per[h]++
			most = max(most, per[h])
		}
	}
	return most
}

// perMachine returns the hosts sharing a machine's cores (at least 1).
func (t Topology) perMachine() int { return max(1, t.HostsPerMachine) }

func (t Topology) cores() int {
	if t.Cores > 0 {
		return t.Cores
	}
	return t.RanksPerHost
}

// String summarises the topology for n ranks in one line.
func (t Topology) String(n int) string {
	hosts, racks := t.hostsRacks(n)
	cores := fmt.Sprintf("%d cores/host", t.cores())
	if pm := t.perMachine(); pm > 1 {
		cores = fmt.Sprintf("%d cores per machine of up to %d hosts", t.cores(), pm)
	}
	if t.NetCPU > 0 {
		cores += fmt.Sprintf(", %.3g µs of a core per network message", t.NetCPU*1e6)
	}
	if t.NetWake > 0 {
		cores += fmt.Sprintf(", a network wait's wake %.3g µs per other rank on a core", t.NetWake*1e6)
	}
	return fmt.Sprintf("%d ranks: %d host(s) × %d ranks, %d rack(s); shm α %.3g µs β %.3g GB/s, net α %.3g µs %.3g GB/s, rack α %.3g µs; NIC %.3g GB/s, uplink %.3g GB/s, %s",
		n, hosts, min(n, t.RanksPerHost), racks, t.SHM.Alpha*1e6, gbps(t.SHM.Beta), t.Net.Alpha*1e6, gbps(t.Net.Beta),
		t.Rack.Alpha*1e6, t.NICBW/1e9, t.UplinkBW/1e9, cores)
}

func gbps(beta float64) float64 {
	if beta <= 0 {
		return 0
	}
	return 1 / beta / 1e9
}

// Hosts returns the number of hosts n ranks occupy.
func (t Topology) Hosts(n int) int {
	h, _ := t.hostsRacks(n)
	return h
}

// hostsRacks returns the number of hosts and racks n ranks occupy.
func (t Topology) hostsRacks(n int) (hosts, racks int) {
	if t.hostOf != nil {
		racks = 1
		for _, g := range t.groupOf {
			racks = max(racks, int(g)+1)
		}
		return len(t.groupOf), racks
	}
	hosts = (n + t.RanksPerHost - 1) / t.RanksPerHost
	racks = 1
	if t.HostsPerRack > 0 {
		racks = (hosts + t.HostsPerRack - 1) / t.HostsPerRack
	}
	return hosts, racks
}

// Layout returns the host layout of n ranks on t: hosts of RanksPerHost
// consecutive ranks, the last possibly smaller, or a topology file's hosts.
func (t Topology) Layout(n int) algo.Layout {
	var l algo.Layout
	if t.hostOf != nil {
		l.Hosts = make([][]int, len(t.groupOf))
		for r, h := range t.hostOf {
			l.Hosts[h] = append(l.Hosts[h], r)
		}
		return l
	}
	for lo := 0; lo < n; lo += t.RanksPerHost {
		h := make([]int, 0, min(t.RanksPerHost, n-lo))
		for r := lo; r < min(lo+t.RanksPerHost, n); r++ {
			h = append(h, r)
		}
		l.Hosts = append(l.Hosts, h)
	}
	return l
}

// Algorithms returns the algorithms of coll to simulate on n ranks of t:
// the registry's and, when the ranks span several hosts, the host-aware
// ones built for t's layout (algo.ForLayout).
func (t Topology) Algorithms(coll sched.Coll, n int) []algo.Algorithm {
	as := algo.For(coll)
	if hosts, _ := t.hostsRacks(n); hosts > 1 && (t.hostOf == nil || len(t.hostOf) == n) {
		for _, a := range algo.ForLayout(t.Layout(n)) {
			if a.Coll == coll {
				as = append(as, a)
			}
		}
	}
	return as
}

// procs returns the CPUs each rank of the most crowded host of n ranks
// gets (its GOMAXPROCS under hcomm run: the cores over the local ranks, at
// least 1).
func (t Topology) procs(n int) int { return max(1, t.cores()/max(1, t.most(n))) }

// oversubscription sets t's terms for more ranks than cores as they apply
// to n ranks: SHMSwitch, SHMWake (scaled to the other ranks on a core,
// and for group calls per core) and SHMMemShare only on an oversubscribed
// host, SHMCoreShare 1 when unset, NetWake scaled to the other ranks on
// a core of an oversubscribed machine.
func (t *Topology) oversubscription(n int) {
	if pc := t.perCore(n); pc > 1 {
		c := t.cores()
		w := t.SHMWake
		if t.SlotWake > 0 {
			w = t.SlotWake
		}
		t.groupWake = w * float64(t.most(n)-1) / float64(c)
		t.SHMWake *= float64((t.most(n)+c-1)/c - 1)
		if t.SHMMemShare > 0 {
			t.MemBW *= t.SHMMemShare
		}
	} else {
		t.SHMSwitch, t.SHMWake, t.groupWake = 0, 0, 0
	}
	if t.SHMCoreShare == 0 {
		t.SHMCoreShare = 1
	}
	t.netWake = 0
	if mr, c := min(n, t.perMachine()*t.most(n)), t.cores(); mr > c {
		t.netWake = t.NetWake * float64((mr+c-1)/c-1)
	}
}

package hcomm

import (
	"log/slog"
	"time"

	"github.com/hcomm-go/hcomm/internal/callpath"
	"github.com/hcomm-go/hcomm/internal/exec"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/settings"
	"github.com/hcomm-go/hcomm/store"
)

// DefaultTimeout bounds every collective when neither Config.Timeout nor
// HCOMM_TIMEOUT says otherwise.
const DefaultTimeout = 10 * time.Minute

// Config configures a communicator. A nil *Config, and every zero field,
// means: take the value from the environment (the HCOMM_ variables listed
// in the README), else the default. Each field names its variable.
type Config struct {
	// Rank and Size place this process in the job (Init only). A zero Size
	// means: read both from the environment (HCOMM_RANK, HCOMM_SIZE, or
	// the other launchers' variables Init lists).
	Rank, Size int

	// Store is the rendezvous store's URL (Init only): tcp://host:port or
	// file:///dir. Empty means HCOMM_STORE.
	Store string

	// Token is the job's shared secret (Init only). Empty means
	// HCOMM_TOKEN.
	Token string

	// Rendezvous, when set, is the store the ranks meet through (Init
	// only), instead of the one Store or HCOMM_STORE names: any
	// implementation of store.Store, such as a program's own coordination
	// service or an etcdstore.Store. Init does not close it. Each job
	// needs a store (or key prefix, see store.WithPrefix) of its own.
	Rendezvous store.Store

	// Timeout bounds each operation (collective, Send, Recv, Barrier,
	// Split) in addition to the caller's ctx; whichever ends first wins.
	// Zero means HCOMM_TIMEOUT or DefaultTimeout; negative means no limit
	// beyond the ctx.
	Timeout time.Duration

	// ConnectTimeout bounds Init's rendezvous and connections, and Split's
	// (Init only; HCOMM_CONNECT_TIMEOUT, default DefaultConnectTimeout).
	ConnectTimeout time.Duration

	// Algo forces algorithms per collective, in HCOMM_ALGO's syntax:
	// "allreduce=ring,broadcast=tree", or one name ("ring") for every
	// collective that has it. An algorithm that cannot serve a call is
	// skipped for that call.
	Algo string

	// ChunkBytes is the size messages are cut into for pipelining
	// (HCOMM_BUFFSIZE; default 1 MiB). It must be the same on every rank.
	ChunkBytes int

	// Transport chooses between ranks on one host (Init only;
	// HCOMM_TRANSPORT): "shm", "tcp" (TCP even within a host) or "auto".
	Transport string

	// NSocks is the number of TCP sockets per pair of ranks and network
	// path, 1 to 16 (Init only; HCOMM_NSOCKS; default 1).
	NSocks int

	// SocketAddr is the address this rank listens on and advertises, or
	// several comma-separated, one per network path (Init only;
	// HCOMM_SOCKET_ADDR). SocketIfname instead picks the addresses of
	// interfaces: prefixes, "=name" for exact names, "^" in front to
	// exclude, comma-separated (HCOMM_SOCKET_IFNAME); every up interface
	// that matches is a path. With neither, the address of the route to
	// the store host, then those of the host's other up interfaces that are
	// not loopback, container or VM bridges, or tunnels; loopback alone when
	// the store is on loopback. Large messages are striped over every path
	// that connects, in proportion to its measured throughput.
	SocketAddr, SocketIfname string

	// Hostname is this rank's host identity: ranks with the same one share
	// memory (Init only; HCOMM_HOSTNAME). Empty means the host name, the
	// network namespace and the boot id.
	Hostname string

	// ShmCMA is the message size from which shared memory copies once
	// with process_vm_readv (Init only; HCOMM_SHM_CMA). Zero means the
	// variable, else off; negative means off.
	ShmCMA int

	// ZeroCopy is the size from which collectives on registered memory
	// (Comm.Alloc) move data directly between the ranks' buffers, at
	// every size from it on (HCOMM_ZERO_COPY; default auto: from 256 KiB,
	// except the sizes where the ordinary program measured faster, see
	// README). Zero means the variable, else auto; negative means off.
	ZeroCopy int

	// CopyEngine is the size from which collectives on registered memory
	// and windows split a copy between this rank's goroutine and
	// copy-engine workers (HCOMM_COPY_ENGINE). Zero means the variable,
	// else auto: 4 MiB when every local rank has a spare CPU, else off;
	// negative means off.
	CopyEngine int

	// Yield says whether waits give the CPU away, in HCOMM_YIELD's syntax
	// (Init only): "1", "0" or "auto" (when the ranks on a machine
	// outnumber its CPUs). Empty means the variable, else auto.
	Yield string

	// TCPPoll is how long a TCP receive of a small message polls its
	// socket before blocking (Init only; HCOMM_TCP_POLL; default 50µs).
	// Negative means never poll.
	TCPPoll time.Duration

	// Checksum adds a CRC32C to every TCP data frame, verified by the
	// receiver (Init only; HCOMM_CHECKSUM=1).
	Checksum bool

	// Insecure lets a job of several ranks join without a secret Token
	// when its store or data ports are reachable from other hosts (Init
	// only; HCOMM_INSECURE=1). Anyone who can reach them can then join
	// the job or read its data; Init logs a warning every time. Without
	// it, such a job fails at Init and says how to set a token; a job
	// whose store and data ports are on loopback needs none.
	Insecure bool

	// Logger receives diagnostics. Nil means a logger on standard error at
	// the level HCOMM_DEBUG names (default: warnings only).
	Logger *slog.Logger

	// CheckResults makes every AllReduce, AllGather and Broadcast compare
	// a hash of its result across the ranks and fail with ErrMismatch if
	// they differ (HCOMM_CHECK_RESULTS=1). It costs one small AllGather per
	// call; it is a debugging aid.
	CheckResults bool

	// Observer, if not nil, is told about every collective of the
	// communicator and of those split from it as it starts and ends (see
	// Observer). Collectives appear in `go tool trace` as regions
	// ("hcomm/AllReduce", …) whether or not it is set.
	Observer *Observer

	// DumpSignal names a signal, "USR1" or "USR2", on which the process
	// writes every live communicator's flight recorder to standard error
	// (HCOMM_DUMP_SIGNAL; ignored outside Unix).
	DumpSignal string

	// CPUAffinity says where the goroutines that poll the transports run
	// (Init only; HCOMM_CPU_AFFINITY): "auto" (or empty) pins them to the
	// rank's CPUs when the rank is bound to fewer than all of the
	// machine's, "off" never, "nic" to the rank's CPUs on the data NIC's
	// NUMA node, or a CPU list such as "0-3,8".
	CPUAffinity string
}

// options is what a communicator keeps of its settings: its call path's
// (timeout, 0 for none; zero-copy threshold; no shm slots; HCOMM_ALGO's
// overrides; logger) and the rest.
type options struct {
	callpath.Settings
	chunk int
	// checkResults compares results across ranks (HCOMM_CHECK_RESULTS).
	checkResults bool
	dumpSignal   string
	copyEngine   int // HCOMM_COPY_ENGINE: 0 auto, < 0 off, > 0 the least bytes
	observer     *Observer
	// pollCPUs are the CPUs the executor's workers are pinned to
	// (HCOMM_CPU_AFFINITY), nil for none.
	pollCPUs []int
}

// resolve lays cfg over the environment's settings.
func resolve(cfg *Config) (settings.Values, options, error) {
	var o options
	c := settings.FromConfig(cfg)
	v, err := settings.Load(settings.Env)
	if err == nil {
		err = v.Overlay(c)
	}
	if err != nil {
		return v, o, invalid("%v", err)
	}
	if o.Overrides, err = plan.ParseOverrides(v.Algo); err != nil {
		return v, o, invalid("algorithm override %q: %v", v.Algo, err)
	}
	o.Timeout, o.chunk, o.Log = v.Timeout, v.ChunkBytes, v.LoggerFor(c)
	if o.chunk <= 0 {
		o.chunk = exec.DefaultChunkBytes
	}
	o.checkResults, o.NoSlots, o.dumpSignal = v.CheckResults, v.NoShmSlots, v.DumpSignal
	o.ZeroCopy, o.ZeroCopyFixed, o.copyEngine = v.ZeroCopy, v.ZeroCopyFixed, v.CopyEngine
	if cfg != nil {
		o.observer = cfg.Observer
	}
	return v, o, nil
}

// Package settings is hcomm's table of settings: every HCOMM_ environment
// variable is declared here once, with its type, default, documentation
// and parser, and this package is the only part of the library that reads
// the environment (the launcher, cmd/hcomm, reads its own).
//
// Load reads the environment into Values; the root package then lays the
// fields of the program's Config over them (Set) and logs what is in effect
// (Log). The README's variable table is tested against Table.
package settings

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Defaults that the root package documents as constants.
const (
	DefaultTimeout        = 10 * time.Minute
	DefaultConnectTimeout = 2 * time.Minute
	DefaultMasterPort     = "29500"
	// DefaultZeroCopy is HCOMM_ZERO_COPY's default: 256 KiB.
	DefaultZeroCopy = 256 << 10
)

// Scope says who reads a variable.
type Scope int

const (
	// Library variables are read by Init and NewLocal.
	Library Scope = iota
	// Program variables are set by `hcomm run` for the program's own use;
	// the library does not read them.
	Program
	// Tool variables pass between hcomm's tools and the processes they
	// start; not for users.
	Tool
	// Test variables are read by the test suites (names ending in * are
	// prefixes).
	Test
)

// Var declares one environment variable.
type Var struct {
	Name    string   // HCOMM_… (a trailing * makes it a prefix)
	Also    []string // other launchers' names read for the same value
	Type    string   // duration, size, int, bool, string, or the choices
	Default string   // as documented; "" when there is none
	Field   string   // the Config field that overrides it, or ""
	Scope   Scope
	Doc     string
	// parse stores the value into v; nil for variables whose reading is
	// not a single value (rank and size, set together).
	parse func(v *Values, s string) error
	// show formats the value in effect as the variable would spell it
	// (nil for variables the library does not read).
	show func(v *Values) string
}

// Values are the settings in effect. The zero value is not meaningful:
// start from Defaults or Load.
type Values struct {
	Rank, Size     int
	RankVars       string // the pair of variables Rank and Size came from, or ""
	RankErr        error  // why the rank and size variables are unusable, if they are
	Launcher       string // the Launchers entry Rank and Size came from, or ""
	LocalRank      int    // the rank within the host the launcher gave, or -1
	Store          string
	Token          string
	MasterAddr     string
	MasterPort     string
	JobID          string // the launchers' job identity, used as a token when there is none
	Timeout        time.Duration
	Algo           string
	ChunkBytes     int
	Debug          string
	ConnectTimeout time.Duration
	Transport      string // "", "shm" or "tcp"
	NSocks         int    // 0: the transport's default
	SocketAddr     string
	SocketIfname   string
	Hostname       string
	ShmCMA         int           // 0: off
	NoShmSlots     bool          // HCOMM_SHM_SLOTS=0: small collectives keep their schedules
	ZeroCopy       int           // 0: off
	ZeroCopyFixed  bool          // ZeroCopy is an explicit size: no rule (zcopy.Ordinary)
	CopyEngine     int           // 0: auto, < 0: off, > 0: the least bytes
	Yield          int           // 1 on, -1 off, 0 auto
	TCPPoll        time.Duration // 0: the transport's default, < 0: never poll
	Checksum       bool
	PathWeights    string        // "" (measured), "speed" or "equal"
	TCPDead        time.Duration // 0: the transport's default, < 0: the system's
	PathStall      time.Duration // 0: the transport's default, < 0: never retire a path
	PathPing       time.Duration // 0: the transport's default, < 0: no idle pings
	CheckResults   bool
	Insecure       bool   // join without a secret token even where strangers can reach the job
	DumpSignal     string // "", "USR1" or "USR2"
	Topology       string // "" (auto) or "off"
	RankTable      string // topology file path, or ""
	CPUAffinity    string // HCOMM_CPU_AFFINITY as given ("" = auto), checked by the topology layer
	BindTo         string // HCOMM_BIND_TO as given ("" = auto), checked by the topology layer
	LocalSize      int    // HCOMM_LOCAL_SIZE (set by hcomm run), or 0
	Trace          string // trace-event file name pattern (HCOMM_TRACE), or ""
	// ProcsSet says the environment sets GOMAXPROCS: oversubscribed ranks
	// then keep it rather than lowering it to their share of the CPUs.
	ProcsSet bool

	// Source records, per variable name, where a value that is not the
	// default came from: "env" or "config".
	Source map[string]string
}

func durationVar(dst func(*Values) *time.Duration, min time.Duration) func(*Values, string) error {
	return func(v *Values, s string) error {
		d, err := ParseDuration(s)
		if err != nil {
			return err
		}
		if d < min {
			return fmt.Errorf("%v is below the least allowed, %v", d, min)
		}
		*dst(v) = d
		return nil
	}
}

func stringVar(dst func(*Values) *string) func(*Values, string) error {
	return func(v *Values, s string) error { *dst(v) = s; return nil }
}

func boolVar(dst func(*Values) *bool) func(*Values, string) error {
	return func(v *Values, s string) error {
		b, err := ParseBool(s)
		*dst(v) = b
		return err
	}
}

// Table is every HCOMM_ variable, in the README's order.
var Table = []Var{
	{Name: "HCOMM_TIMEOUT", Type: "duration", Default: "10m", Field: "Timeout",
		Doc:   "bound on every operation (90s, 5m, or seconds); 0 = none",
		parse: durationVar(func(v *Values) *time.Duration { return &v.Timeout }, 0),
		show: func(v *Values) string {
			return showDur(v.Timeout)
		}},
	{Name: "HCOMM_ALGO", Type: "string", Field: "Algo",
		Doc:   "force algorithms: allreduce=ring,broadcast=tree, or one name for all",
		parse: stringVar(func(v *Values) *string { return &v.Algo }),
		show: func(v *Values) string {
			return v.Algo
		}},
	{Name: "HCOMM_BUFFSIZE", Type: "size", Default: "1M", Field: "ChunkBytes",
		Doc: "pipelining chunk in bytes; the same on every rank",
		parse: func(v *Values, s string) error {
			n, err := ParseSizeInt(s)
			if err == nil && n <= 0 {
				err = fmt.Errorf("want a positive size such as 4194304 or 4M")
			}
			v.ChunkBytes = n
			return err
		},
		show: func(v *Values) string {
			if v.ChunkBytes == 0 {
				return "1M"
			}
			return strconv.Itoa(v.ChunkBytes)
		}},
	{Name: "HCOMM_DEBUG", Type: "WARN|INFO|DEBUG|ERROR|OFF", Default: "WARN", Field: "Logger",
		Doc: "log level on standard error",
		parse: func(v *Values, s string) error {
			_, _, err := ParseLevel(s)
			v.Debug = strings.ToUpper(strings.TrimSpace(s))
			return err
		},
		show: func(v *Values) string {
			return v.Debug
		}},
	{Name: "HCOMM_RANK", Also: []string{"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "JOB_COMPLETION_INDEX"}, Type: "int", Default: "0", Field: "Rank",
		Doc: "this process's rank (Init)",
		show: func(v *Values) string {
			return strconv.Itoa(v.Rank)
		}},
	{Name: "HCOMM_SIZE", Also: []string{"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE"}, Type: "int", Default: "1", Field: "Size",
		Doc: "the job's number of ranks (Init)",
		show: func(v *Values) string {
			return strconv.Itoa(v.Size)
		}},
	{Name: "HCOMM_STORE", Type: "string", Field: "Store",
		Doc:   "rendezvous store: tcp://host:port, file:///shared/dir, or etcd://host:2379/prefix (with store/etcdstore imported)",
		parse: stringVar(func(v *Values) *string { return &v.Store }),
		show: func(v *Values) string {
			if u, err := url.Parse(v.Store); err == nil && u.User != nil {
				return u.Redacted() // no etcd password in the log
			}
			return v.Store
		}},
	{Name: "MASTER_ADDR", Type: "string",
		Doc:   "torchrun-style rendezvous when HCOMM_STORE is unset: rank 0 serves the store",
		parse: stringVar(func(v *Values) *string { return &v.MasterAddr }),
		show: func(v *Values) string {
			return v.MasterAddr
		}},
	{Name: "MASTER_PORT", Type: "string", Default: DefaultMasterPort,
		Doc:   "the port of the MASTER_ADDR rendezvous",
		parse: stringVar(func(v *Values) *string { return &v.MasterPort }),
		show: func(v *Values) string {
			return v.MasterPort
		}},
	{Name: "HCOMM_TOKEN", Type: "string", Field: "Token",
		Doc:   "the job's secret; store clients and TCP peers without it are refused",
		parse: stringVar(func(v *Values) *string { return &v.Token }),
		show: func(v *Values) string {
			if v.Token == "" {
				return ""
			}
			return "(set)"
		}},
	{Name: "HCOMM_INSECURE", Type: "bool", Default: "0", Field: "Insecure",
		Doc:   "1: join without HCOMM_TOKEN even when the store or data ports are reachable from other hosts (anyone who can reach them can join; logged as a warning at every Init)",
		parse: boolVar(func(v *Values) *bool { return &v.Insecure }),
		show: func(v *Values) string {
			return fmt.Sprint(v.Insecure)
		}},
	{Name: "HCOMM_CONNECT_TIMEOUT", Type: "duration", Default: "2m", Field: "ConnectTimeout",
		Doc:   "bound on Init's rendezvous and connections (and Split's)",
		parse: durationVar(func(v *Values) *time.Duration { return &v.ConnectTimeout }, time.Nanosecond),
		show: func(v *Values) string {
			return showDur(v.ConnectTimeout)
		}},
	{Name: "HCOMM_TRANSPORT", Type: "shm|tcp|auto", Default: "auto", Field: "Transport",
		Doc: "shm, tcp (force TCP even within a host) or auto",
		parse: func(v *Values, s string) error {
			t, err := ParseTransport(s)
			v.Transport = t
			return err
		},
		show: func(v *Values) string {
			if v.Transport == "" {
				return "auto"
			}
			return v.Transport
		}},
	{Name: "HCOMM_NSOCKS", Type: "int", Default: "1", Field: "NSocks",
		Doc: "TCP sockets per pair of ranks and network path (1-16)",
		parse: func(v *Values, s string) error {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("%q is not a number", s)
			}
			if n < 1 || n > 16 {
				return fmt.Errorf("%d: want 1..16", n)
			}
			v.NSocks = n
			return nil
		},
		show: func(v *Values) string {
			if v.NSocks == 0 {
				return "1"
			}
			return strconv.Itoa(v.NSocks)
		}},
	{Name: "HCOMM_SOCKET_ADDR", Type: "string", Field: "SocketAddr",
		Doc:   "address this rank listens on and advertises; several, comma-separated, are network paths",
		parse: stringVar(func(v *Values) *string { return &v.SocketAddr }),
		show: func(v *Values) string {
			return v.SocketAddr
		}},
	{Name: "HCOMM_SOCKET_IFNAME", Type: "string", Field: "SocketIfname",
		Doc:   "interfaces whose addresses are this rank's network paths: prefixes, =exact, ^ to exclude, comma-separated",
		parse: stringVar(func(v *Values) *string { return &v.SocketIfname }),
		show: func(v *Values) string {
			return v.SocketIfname
		}},
	{Name: "HCOMM_HOSTNAME", Type: "string", Field: "Hostname",
		Doc:   "host identity; ranks with the same one share memory",
		parse: stringVar(func(v *Values) *string { return &v.Hostname }),
		show: func(v *Values) string {
			return v.Hostname
		}},
	{Name: "HCOMM_SHM_CMA", Type: "size", Field: "ShmCMA",
		Doc: "message size from which shared memory uses single-copy process_vm_readv; unset = off",
		parse: func(v *Values, s string) error {
			n, err := ParseSizeInt(s)
			v.ShmCMA = n
			return err
		},
		show: func(v *Values) string {
			if v.ShmCMA <= 0 {
				return "off"
			}
			return strconv.Itoa(v.ShmCMA)
		}},
	{Name: "HCOMM_ZERO_COPY", Type: "size|auto|off", Default: "auto", Field: "ZeroCopy",
		Doc: "size from which collectives on registered memory (Comm.Alloc) copy directly between ranks' buffers; auto = from 256K except where the ordinary program measured faster (2 ranks: Broadcast below 8M); 0 = off",
		parse: func(v *Values, s string) error {
			v.ZeroCopyFixed = false
			switch s {
			case "off":
				v.ZeroCopy = 0
				return nil
			case "auto":
				v.ZeroCopy = DefaultZeroCopy
				return nil
			}
			n, err := ParseSizeInt(s)
			v.ZeroCopy, v.ZeroCopyFixed = n, true
			return err
		},
		show: func(v *Values) string {
			switch {
			case v.ZeroCopy <= 0:
				return "off"
			case !v.ZeroCopyFixed:
				return "auto"
			}
			return strconv.Itoa(v.ZeroCopy)
		}},
	{Name: "HCOMM_COPY_ENGINE", Type: "size|auto|off", Default: "auto", Field: "CopyEngine",
		Doc: "size from which registered-memory collectives and windows split a local copy over copy-engine workers; auto = 4M when every local rank has a spare CPU, else off",
		parse: func(v *Values, s string) error {
			switch s {
			case "auto":
				v.CopyEngine = 0
				return nil
			case "off", "0":
				v.CopyEngine = -1
				return nil
			}
			n, err := ParseSizeInt(s)
			v.CopyEngine = n
			if err == nil && n <= 0 {
				v.CopyEngine = -1
			}
			return err
		},
		show: func(v *Values) string {
			switch {
			case v.CopyEngine == 0:
				return "auto"
			case v.CopyEngine < 0:
				return "off"
			}
			return strconv.Itoa(v.CopyEngine)
		}},
	{Name: "HCOMM_YIELD", Type: "auto|1|0", Default: "auto", Field: "Yield",
		Doc: "whether waits give the CPU away",
		parse: func(v *Values, s string) error {
			y, err := ParseYield(s)
			v.Yield = y
			return err
		},
		show: func(v *Values) string {
			return map[int]string{0: "auto", 1: "1", -1: "0"}[v.Yield]
		}},
	{Name: "HCOMM_TCP_POLL", Type: "duration", Default: "50us", Field: "TCPPoll",
		Doc: "how long a TCP receive of a small message polls before blocking; 0 = never; unset: 200us when ranks outnumber CPUs",
		parse: func(v *Values, s string) error {
			d, err := ParseDuration(s)
			if err != nil {
				return err
			}
			v.TCPPoll = d
			if d == 0 {
				v.TCPPoll = -1
			}
			return nil
		},
		show: func(v *Values) string {
			switch {
			case v.TCPPoll == 0:
				return "50us"
			case v.TCPPoll < 0:
				return "0"
			}
			return v.TCPPoll.String()
		}},
	{Name: "HCOMM_PATH_WEIGHTS", Type: "measured|speed|equal", Default: "measured",
		Doc: "how large TCP messages are shared among network paths: by measured throughput, link speed, or evenly",
		parse: func(v *Values, s string) error {
			switch w := strings.ToLower(strings.TrimSpace(s)); w {
			case "measured", "":
				v.PathWeights = ""
			case "speed", "equal":
				v.PathWeights = w
			default:
				return fmt.Errorf("want measured, speed or equal")
			}
			return nil
		},
		show: func(v *Values) string {
			if v.PathWeights == "" {
				return "measured"
			}
			return v.PathWeights
		}},
	{Name: "HCOMM_TCP_DEAD", Type: "duration", Default: "20s",
		Doc: "a TCP connection whose peer's host answers nothing for this long fails (keepalive, TCP_USER_TIMEOUT); 0 = the system's defaults",
		parse: func(v *Values, s string) error {
			d, err := ParseDuration(s)
			if err != nil {
				return err
			}
			if d < 0 || d > 0 && d < time.Second {
				return fmt.Errorf("%v: want 0 or at least 1s", d)
			}
			v.TCPDead = d
			if d == 0 {
				v.TCPDead = -1
			}
			return nil
		},
		show: func(v *Values) string {
			switch {
			case v.TCPDead == 0:
				return "20s"
			case v.TCPDead < 0:
				return "0"
			}
			return v.TCPDead.String()
		}},
	{Name: "HCOMM_SHM_SLOTS", Type: "bool", Default: "1",
		Doc: "0: small collectives of ranks all on one host run their schedules over the shared-memory rings instead of the segment's slots; the same on every rank",
		parse: func(v *Values, s string) error {
			b, err := ParseBool(s)
			v.NoShmSlots = !b
			return err
		},
		show: func(v *Values) string {
			return fmt.Sprint(!v.NoShmSlots)
		}},
	{Name: "HCOMM_PATH_STALL", Type: "duration", Default: "1s",
		Doc: "a network path whose stripe gets no acknowledgement for this long is retired and its stripes sent again on the pair's first path; 0 = never",
		parse: func(v *Values, s string) error {
			d, err := ParseDuration(s)
			if err != nil {
				return err
			}
			if d < 0 || d > 0 && d < 10*time.Millisecond {
				return fmt.Errorf("%v: want 0 or at least 10ms", d)
			}
			v.PathStall = d
			if d == 0 {
				v.PathStall = -1
			}
			return nil
		},
		show: func(v *Values) string {
			switch {
			case v.PathStall == 0:
				return "1s"
			case v.PathStall < 0:
				return "0"
			}
			return v.PathStall.String()
		}},
	{Name: "HCOMM_PATH_PING", Type: "duration", Default: "1s",
		Doc: "how often each idle connection of a network path other than a pair's first is pinged, so a path that stops while idle is retired (after HCOMM_PATH_STALL) before a message needs it; 0 = never",
		parse: func(v *Values, s string) error {
			d, err := ParseDuration(s)
			if err != nil {
				return err
			}
			if d < 0 || d > 0 && d < 10*time.Millisecond {
				return fmt.Errorf("%v: want 0 or at least 10ms", d)
			}
			v.PathPing = d
			if d == 0 {
				v.PathPing = -1
			}
			return nil
		},
		show: func(v *Values) string {
			switch {
			case v.PathPing == 0:
				return "1s"
			case v.PathPing < 0:
				return "0"
			}
			return v.PathPing.String()
		}},
	{Name: "HCOMM_CHECKSUM", Type: "bool", Default: "0", Field: "Checksum",
		Doc:   "1: CRC32C on every TCP data frame",
		parse: boolVar(func(v *Values) *bool { return &v.Checksum }),
		show: func(v *Values) string {
			return fmt.Sprint(v.Checksum)
		}},
	{Name: "HCOMM_CHECK_RESULTS", Type: "bool", Default: "0", Field: "CheckResults",
		Doc:   "1: compare a hash of every AllReduce/AllGather/Broadcast result across ranks",
		parse: boolVar(func(v *Values) *bool { return &v.CheckResults }),
		show: func(v *Values) string {
			return fmt.Sprint(v.CheckResults)
		}},
	{Name: "HCOMM_DUMP_SIGNAL", Type: "USR1|USR2", Field: "DumpSignal",
		Doc: "that signal writes every live communicator's flight recorder to standard error",
		parse: func(v *Values, s string) error {
			sig, err := ParseSignal(s)
			v.DumpSignal = sig
			return err
		},
		show: func(v *Values) string {
			return v.DumpSignal
		}},
	{Name: "HCOMM_TOPOLOGY", Type: "auto|off", Default: "auto",
		Doc: "off: no topology exchange at Init, flat rank-order algorithms only",
		parse: func(v *Values, s string) error {
			switch t := strings.ToLower(strings.TrimSpace(s)); t {
			case "auto", "on", "1":
				v.Topology = ""
			case "off", "0", "flat":
				v.Topology = "off"
			default:
				return fmt.Errorf("want auto or off")
			}
			return nil
		},
		show: func(v *Values) string {
			if v.Topology == "" {
				return "auto"
			}
			return v.Topology
		}},
	{Name: "HCOMM_RANK_TABLE", Also: []string{"RANK_TABLE_FILE"}, Type: "string",
		Doc:   "topology file (HCCL rank table JSON, or hcomm's format) that places ranks on hosts; checked against the machines at Init",
		parse: stringVar(func(v *Values) *string { return &v.RankTable }),
		show:  func(v *Values) string { return v.RankTable }},
	{Name: "HCOMM_CPU_AFFINITY", Type: "auto|off|nic|CPU list", Default: "auto", Field: "CPUAffinity",
		Doc:   "where the polling goroutines run: auto pins them to the rank's CPUs when the rank is bound (hcomm run --bind-to), off never, nic to the rank's CPUs on the data NIC's NUMA node, or a CPU list (0-3,8)",
		parse: stringVar(func(v *Values) *string { return &v.CPUAffinity }),
		show: func(v *Values) string {
			if v.CPUAffinity == "" {
				return "auto"
			}
			return v.CPUAffinity
		}},
	{Name: "HCOMM_TRACE", Type: "string",
		Doc:   "write each rank's collectives to a trace-event file (Perfetto, chrome://tracing): job.json gives job.rank0.json, …; %r in the name is replaced by the rank (Init)",
		parse: stringVar(func(v *Values) *string { return &v.Trace }),
		show: func(v *Values) string {
			if v.Trace == "" {
				return "off"
			}
			return v.Trace
		}},
	{Name: "HCOMM_PERF_EMIT", Type: "string", Scope: Tool,
		Doc: "set by hcomm perf on the ranks it launches"},
	{Name: "HCOMM_LOCAL_RANK", Type: "int", Scope: Program,
		Doc: "set by hcomm run: the rank within the host (Init logs it)"},
	{Name: "HCOMM_LOCAL_SIZE", Type: "int", Scope: Program,
		Doc: "set by hcomm run: the number of ranks on the host"},
	{Name: "HCOMM_BIND_TO", Type: "auto|none|core|numa", Default: "auto",
		Doc:   "set by hcomm run --bind-to: core or numa (or core:overload-allowed, numa:overload-allowed: more local ranks than CPUs is an error without it) on the ranks it starts through --rsh (the rank binds itself at Init by HCOMM_LOCAL_RANK and HCOMM_LOCAL_SIZE, as hcomm run binds the ranks it starts on its own machine); auto: where several hosts of the job share a machine (network namespaces, containers) and none of their ranks is bound, each binds itself at Init to its share of the machine's CPUs, so the hosts' leaders run on different CPUs; none: never bound",
		parse: stringVar(func(v *Values) *string { return &v.BindTo }),
		show: func(v *Values) string {
			if v.BindTo == "" {
				return "auto"
			}
			return v.BindTo
		}},
	{Name: "HCOMM_TEST_*", Scope: Test, Doc: "the root package's test children"},
	{Name: "HCOMM_SHM_TEST_*", Scope: Test, Doc: "the shm transport's test children"},
	{Name: "HCOMM_TCP_TEST_*", Scope: Test, Doc: "the TCP transport's test children"},
	{Name: "HCOMM_STORE_TEST_*", Scope: Test, Doc: "the store's test children"},
	{Name: "HCOMM_REQUIRE_NETNS", Type: "bool", Scope: Test, Doc: "fail, not skip, the netns tests without their prerequisites"},
	{Name: "HCOMM_UPDATE_GOLDEN", Type: "bool", Scope: Test, Doc: "rewrite the schedule golden files"},
	{Name: "HCOMM_BENCH_ALLOW_ALLOCS", Type: "bool", Scope: Test, Doc: "benchmarks report allocations instead of failing"},
}

// Launcher is one launcher's convention for telling a process its place
// in the job.
type Launcher struct {
	Name       string
	Rank, Size string   // the variables holding the rank and the job's size
	LocalRank  []string // variables that may hold the rank within the host, first set wins
}

// Launchers are the conventions Load reads the rank and size by, in order:
// the first whose rank or size variable is set decides (a launcher whose
// size variable alone is set gives way to a later one whose rank variable
// is set, so that HCOMM_SIZE can complete a Kubernetes Indexed Job's
// JOB_COMPLETION_INDEX, for which Kubernetes provides no size).
var Launchers = []Launcher{
	{"hcomm", "HCOMM_RANK", "HCOMM_SIZE", []string{"HCOMM_LOCAL_RANK"}},
	{"torchrun", "RANK", "WORLD_SIZE", []string{"LOCAL_RANK"}},
	{"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", []string{"OMPI_COMM_WORLD_LOCAL_RANK"}},
	{"Slurm", "SLURM_PROCID", "SLURM_NTASKS", []string{"SLURM_LOCALID"}},
	{"PMI", "PMI_RANK", "PMI_SIZE", []string{"PMI_LOCAL_RANK", "MPI_LOCALRANKID"}},
	{"Kubernetes", "JOB_COMPLETION_INDEX", "HCOMM_SIZE", nil},
}

// jobIDVars name the launchers' job identities: without a token, the job
// is tied to them.
var jobIDVars = []string{"SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "OMPI_MCA_orte_jobfam_session_dir"}

// Lookup returns the declaration of name.
func Lookup(name string) (Var, bool) {
	for _, v := range Table {
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}

// Defaults returns the values in effect when nothing is set.
func Defaults() Values {
	return Values{Size: 1, LocalRank: -1, MasterPort: DefaultMasterPort, Timeout: DefaultTimeout,
		ConnectTimeout: DefaultConnectTimeout, Debug: "WARN", ZeroCopy: DefaultZeroCopy, Source: map[string]string{}}
}

// Env reads the process environment; it is the library's only reader.
func Env(name string) (string, bool) { return os.LookupEnv(name) }

// Load returns the defaults overlaid with what lookup (Env in production)
// finds. An invalid value is an error naming the variable.
func Load(lookup func(string) (string, bool)) (Values, error) {
	v := Defaults()
	for _, d := range Table {
		if d.Scope != Library || d.parse == nil {
			continue
		}
		s, ok := lookup(d.Name)
		for _, also := range d.Also {
			if ok && s != "" {
				break
			}
			s, ok = lookup(also)
		}
		if !ok || s == "" {
			continue
		}
		if err := d.parse(&v, s); err != nil {
			return v, fmt.Errorf("%s=%q: %w", d.Name, s, err)
		}
		v.Source[d.Name] = "env"
	}
	if s, ok := lookup("GOMAXPROCS"); ok && s != "" {
		v.ProcsSet = true
	}
	if s, ok := lookup("HCOMM_LOCAL_SIZE"); ok {
		v.LocalSize, _ = strconv.Atoi(strings.TrimSpace(s))
	}
	v.RankErr = v.rankSize(lookup)
	ids := make([]string, len(jobIDVars))
	for i, n := range jobIDVars {
		ids[i], _ = lookup(n)
	}
	v.JobID = strings.Join(ids, "/")
	return v, nil
}

// rankSize reads the rank, size and local rank by the first of Launchers
// that applies.
func (v *Values) rankSize(lookup func(string) (string, bool)) error {
	v.LocalRank = -1
	get := func(name string) string { s, _ := lookup(name); return strings.TrimSpace(s) }
	for i, l := range Launchers {
		rs, ss := get(l.Rank), get(l.Size)
		if rs == "" && ss == "" {
			continue
		}
		if rs == "" && laterRank(Launchers[i+1:], get) {
			continue
		}
		rank, err1 := strconv.Atoi(rs)
		size, err2 := strconv.Atoi(ss)
		if err1 != nil || err2 != nil || size < 1 || rank < 0 || rank >= size {
			return fmt.Errorf("%s=%q %s=%q (%s): want 0 <= rank < size", l.Rank, rs, l.Size, ss, l.Name)
		}
		v.Rank, v.Size, v.RankVars, v.Launcher = rank, size, l.Rank+","+l.Size, l.Name
		v.Source["HCOMM_RANK"], v.Source["HCOMM_SIZE"] = "env", "env"
		for _, n := range l.LocalRank {
			if lr, err := strconv.Atoi(get(n)); err == nil && lr >= 0 && lr < size {
				v.LocalRank = lr
				break
			}
		}
		return nil
	}
	return nil
}

// laterRank says whether one of ls has its rank variable set.
func laterRank(ls []Launcher, get func(string) string) bool {
	for _, l := range ls {
		if get(l.Rank) != "" {
			return true
		}
	}
	return false
}

// Set records that the program's Config set the variable's value.
func (v *Values) Set(name string) { v.Source[name] = "config" }

// Logger returns a logger on standard error at the level of v.Debug.
func (v *Values) Logger() *slog.Logger {
	lvl, off, _ := ParseLevel(v.Debug)
	if off {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// Log writes the settings in effect as one INFO record: each library
// variable's value, and for those not at their default, where they came
// from. The token is never logged.
func (v *Values) Log(log *slog.Logger) {
	if !log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	attrs := make([]any, 0, 2*len(Table))
	for _, d := range Table {
		if d.Scope != Library {
			continue
		}
		val := d.show(v)
		if src := v.Source[d.Name]; src != "" {
			val += " (" + src + ")"
		}
		attrs = append(attrs, slog.String(d.Name, val))
	}
	log.Info("hcomm settings", attrs...)
}

// showDur formats a duration setting; 0 means none.
func showDur(d time.Duration) string {
	if d == 0 {
		return "none"
	}
	return d.String()
}

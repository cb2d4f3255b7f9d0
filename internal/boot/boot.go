// Package boot builds a communicator's transport through the rendezvous
// store: every rank publishes where it listens and which host it is on,
// reads everybody else's card, and then talks to the ranks of its own host
// through shared memory and to the others through TCP.
package boot

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/transport/mux"
	"github.com/hcomm-go/hcomm/internal/transport/shm"
	"github.com/hcomm-go/hcomm/internal/transport/tcp"
	"github.com/hcomm-go/hcomm/store"
)

// Options says how to build one rank's transport for one communicator.
type Options struct {
	Rank, Size int
	// Store is the job's store; Connect namespaces it by CommID.
	Store  store.Store
	CommID string
	// Token is the job secret; TCP peers must present the same.
	Token [32]byte
	// Transport forces "tcp" between every pair, or "shm" (an error if
	// some peer is on another host); "" picks per pair.
	Transport string
	// Host identifies this rank's host; ranks with equal Host share memory.
	Host string
	// ListenHost is the address to listen on for TCP peers ("" = any).
	// AdvertiseHost is the address peers are told to dial, or several
	// comma-separated, one per network path (see ListenAddress).
	ListenHost, AdvertiseHost string
	NSocks                    int
	// ChunkBytes sizes the shared-memory ring slots.
	ChunkBytes int
	// Checksum adds a CRC32C to every TCP data frame (HCOMM_CHECKSUM).
	Checksum bool
	// PathWeights, TCPDead and PathStall are tcp.Config.Weights,
	// DeadAfter and StallAfter (HCOMM_PATH_WEIGHTS, HCOMM_TCP_DEAD,
	// HCOMM_PATH_STALL).
	PathWeights string
	TCPDead     time.Duration
	PathStall   time.Duration
	PathPing    time.Duration // tcp.Config.PingEvery (HCOMM_PATH_PING)
	// CMAThreshold is the message size from which shared memory uses a
	// single-copy process_vm_readv; <= 0 disables it.
	CMAThreshold int

	// Yield makes waits poll with sched_yield (shared memory) and between
	// socket polls (TCP): 0 when the ranks on this machine outnumber its
	// CPUs, a positive value always, a negative value never.
	Yield int
	// KeepProcs leaves GOMAXPROCS alone (the environment sets it).
	// Otherwise, when the ranks on this machine outnumber its CPUs and
	// Yield is not negative, Connect lowers GOMAXPROCS to the rank's share
	// of the CPUs (see Procs), unless the program set another value than
	// the runtime's default itself (see ProcsChosen).
	KeepProcs bool
	// TCPPoll is tcp.Config.PollFor.
	TCPPoll time.Duration
	Logger  *slog.Logger
}

// Card is what a rank publishes about itself.
type Card struct {
	Host string `json:"host"`
	Addr string `json:"addr"` // host:port of its TCP listener, or several comma-separated (one per network path)
	PID  int    `json:"pid"`
	// Machine identifies the kernel (its boot id): ranks in different
	// network namespaces of one machine share its CPUs.
	Machine string `json:"machine,omitempty"`
}

// ProgressEvery is how often Connect, at INFO, says which ranks it still
// waits for.
var ProgressEvery = 5 * time.Second

// progressList bounds the ranks a progress line names.
const progressList = 8

// reportJoining logs, every ProgressEvery until ctx ends, how many ranks
// have published their cards and the first ranks still missing, from
// next (the rank Connect waits for; those below it have published).
func reportJoining(ctx context.Context, kv store.Store, o Options, next *atomic.Int64) {
	t := time.NewTicker(ProgressEvery)
	defer t.Stop()
	seen := make(map[int]bool)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		joined, err := kv.Add(ctx, "joined", 0)
		if err != nil {
			continue
		}
		var missing []string
		for r := int(next.Load()); r < o.Size && len(missing) < progressList && ctx.Err() == nil; r++ {
			if seen[r] {
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			_, err := kv.Get(pctx, "card/"+strconv.Itoa(r))
			cancel()
			if err == nil {
				seen[r] = true
			} else {
				missing = append(missing, strconv.Itoa(r))
			}
		}
		if ctx.Err() != nil {
			return
		}
		if n := o.Size - int(joined) - len(missing); n > 0 {
			missing = append(missing, fmt.Sprintf("and %d more", n))
		}
		o.Logger.Info(fmt.Sprintf("%d/%d ranks joined; waiting for %s", joined, o.Size, strings.Join(missing, ", ")),
			"comm", o.CommID, "rank", o.Rank)
	}
}

// Procs is the GOMAXPROCS of a process that holds mine of the sharing ranks
// of a machine with cpus CPUs and now has procs: its share of the CPUs (at
// least 1) when the ranks outnumber the CPUs, as `hcomm run` gives its
// local ranks, else procs; never more than procs. Ranks that each keep a
// scheduler thread per CPU on an oversubscribed machine take the CPUs from
// each other's busy threads: spare threads spin for work and wake-ups cross
// threads, which costs a small collective across network namespaces three
// times its time.
func Procs(sharing, mine, cpus, procs int) int {
	if sharing <= cpus {
		return procs
	}
	return min(procs, max(1, cpus*max(1, mine)/sharing))
}

// ProcsChosen reports whether the program chose its GOMAXPROCS, cur, itself
// (with runtime.GOMAXPROCS): whether cur differs from the runtime's default
// for this process, which it learns by setting the default and then, if
// cur differs, setting cur back. A program that set GOMAXPROCS to the
// default itself cannot be told from one that did not.
func ProcsChosen(cur int) bool {
	runtime.SetDefaultGOMAXPROCS()
	if runtime.GOMAXPROCS(0) == cur {
		return false
	}
	runtime.GOMAXPROCS(cur)
	return true
}

// OversubscribedPoll is how long a TCP receive polls (yielding the CPU
// between polls) when the ranks on this machine outnumber its CPUs and
// HCOMM_TCP_POLL is not set: longer than tcp.DefaultPollFor, since the
// peer it waits for may first need the CPU of a rank that yields it, and a
// wake-up from the network poller then costs more than the polls.
const OversubscribedPoll = 200 * time.Microsecond

// pollFor is tcp.Config.PollFor for the setting d (0: default).
func pollFor(d time.Duration, oversub bool) time.Duration {
	if d == 0 && oversub {
		return OversubscribedPoll
	}
	return d
}

// yieldSetting is shm.Config.Yield for a decision already taken.
func yieldSetting(on bool) int {
	if on {
		return 1
	}
	return -1
}

// Result is a connected transport and what was learned on the way.
type Result struct {
	Transport transport.Transport
	Cards     []Card
	Remote    bool   // some peer is on another host
	Peers     string // which transport reaches which peers, for the logs
}

// maxCard bounds a card read from the store.
const maxCard = 4096

// Connect publishes this rank's card, reads every rank's card and builds
// the transport. It returns when ctx ends at the latest.
func Connect(ctx context.Context, o Options) (*Result, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	kv := store.WithPrefix(o.Store, "hcomm/"+o.CommID)
	lis, err := net.Listen("tcp", net.JoinHostPort(o.ListenHost, "0"))
	if err != nil {
		return nil, fmt.Errorf("listen on %q (HCOMM_SOCKET_ADDR / HCOMM_SOCKET_IFNAME): %w", o.ListenHost, err)
	}
	closeLis := true
	defer func() {
		if closeLis {
			lis.Close()
		}
	}()
	port := lis.Addr().(*net.TCPAddr).Port
	var paths []string
	for _, h := range strings.Split(o.AdvertiseHost, ",") {
		paths = append(paths, net.JoinHostPort(h, strconv.Itoa(port)))
	}
	me := Card{Host: o.Host, Addr: strings.Join(paths, ","), PID: os.Getpid(), Machine: MachineID()}
	b, _ := json.Marshal(me)
	if err := kv.Set(ctx, "card/"+strconv.Itoa(o.Rank), b); err != nil {
		return nil, fmt.Errorf("publish this rank's address: %w", err)
	}
	kv.Add(ctx, "joined", 1) // counted for the progress lines only
	cards := make([]Card, o.Size)
	var next atomic.Int64 // the rank whose card the loop waits for
	if o.Size > 1 && o.Logger.Enabled(ctx, slog.LevelInfo) {
		pctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			reportJoining(pctx, kv, o, &next)
		}()
		defer func() { stop(); <-done }()
	}
	for r := range cards {
		next.Store(int64(r))
		v, err := kv.Get(ctx, "card/"+strconv.Itoa(r))
		if err != nil {
			return nil, fmt.Errorf("wait for rank %d to publish its address: %w", r, err)
		}
		if len(v) > maxCard || json.Unmarshal(v, &cards[r]) != nil || cards[r].Host == "" {
			return nil, fmt.Errorf("rank %d published an unreadable address card (%d bytes)", r, len(v))
		}
	}
	var local []int
	remote := false
	// Ranks that share this machine's CPUs: the same kernel (boot id),
	// whatever their host identity (network namespaces) or transport.
	// Of them, mine are this process's (ranks as goroutines of one test
	// or program).
	sharing, mine := 0, 0
	for _, c := range cards {
		if c.Host == o.Host || (me.Machine != "" && c.Machine == me.Machine) {
			sharing++
			if c.PID == me.PID {
				mine++
			}
		}
	}
	oversub := o.Yield > 0 || (o.Yield == 0 && sharing > runtime.NumCPU())
	if !o.KeepProcs && o.Yield >= 0 {
		cur := runtime.GOMAXPROCS(0)
		if n := Procs(sharing, mine, runtime.NumCPU(), cur); n < cur && !ProcsChosen(cur) {
			runtime.GOMAXPROCS(n)
			o.Logger.Info("hcomm: the ranks sharing this machine outnumber its CPUs: GOMAXPROCS lowered (set GOMAXPROCS or HCOMM_YIELD=0 to keep it)",
				"ranks", sharing, "cpus", runtime.NumCPU(), "from", cur, "to", n)
		}
	}
	addrs := make([]string, o.Size)
	for r, c := range cards {
		switch {
		case r == o.Rank:
			local = append(local, r)
		case c.Host == o.Host && o.Transport != "tcp":
			local = append(local, r)
		default:
			remote = true
			addrs[r] = c.Addr
		}
	}
	if remote && o.Transport == "shm" {
		return nil, errors.New("HCOMM_TRANSPORT=shm but some ranks are on other hosts")
	}
	route := make([]transport.Transport, o.Size)
	var parts []transport.Transport
	fail := func(err error) (*Result, error) {
		for _, t := range parts {
			t.Close()
		}
		return nil, err
	}
	if len(local) > 1 {
		// Each host's segment is named under its lowest rank's key, so
		// hosts sharing one store never read each other's segment.
		t, err := shm.New(ctx, shm.Config{Rank: o.Rank, Size: o.Size, Local: local,
			KV: store.WithPrefix(kv, "shm/"+strconv.Itoa(local[0])), SlotBytes: slotBytes(o.ChunkBytes),
			CMAThreshold: cma(o.CMAThreshold), Yield: yieldSetting(oversub), Logger: o.Logger})
		if err != nil {
			return fail(fmt.Errorf("shared memory with ranks %v: %w", local, err))
		}
		parts = append(parts, t)
		for _, r := range local {
			route[r] = t
		}
	}
	if remote {
		h := sha256.Sum256([]byte(o.CommID))
		t, err := tcp.New(tcp.Config{Rank: o.Rank, Size: o.Size, Token: o.Token,
			CommID: binary.LittleEndian.Uint64(h[:8]), Listener: lis, Addrs: addrs,
			NSocks: o.NSocks, Checksum: o.Checksum, ConnectTimeout: timeLeft(ctx), Logger: o.Logger, LinkRate: LinkRate,
			Weights: o.PathWeights, DeadAfter: o.TCPDead, StallAfter: o.PathStall, PingEvery: o.PathPing,
			PollFor: pollFor(o.TCPPoll, oversub), Yield: oversub})
		if err != nil {
			return fail(err)
		}
		closeLis = false
		parts = append(parts, t)
		var eager []int
		for r := range addrs {
			if addrs[r] != "" {
				route[r] = t
				// The ring neighbours are needed by the first large
				// collective; connect them now, the rest on first use.
				if r == (o.Rank+1)%o.Size || r == (o.Rank+o.Size-1)%o.Size {
					eager = append(eager, r)
				}
			}
		}
		if err := t.Connect(ctx, eager); err != nil {
			return fail(fmt.Errorf("connect to ranks %v: %w", eager, err))
		}
	}
	m, err := mux.New(o.Rank, o.Size, route)
	if err != nil {
		return fail(err)
	}
	return &Result{Transport: m, Cards: cards, Remote: remote, Peers: peerClasses(o, cards, len(local))}, nil
}

// peerClasses says which transport reaches which peers, for the logs:
// "shm 3 peers, tcp 4 peers on 2 hosts".
func peerClasses(o Options, cards []Card, local int) string {
	var parts []string
	if local > 1 {
		parts = append(parts, fmt.Sprintf("shm %d peers", local-1))
	}
	hosts := map[string]bool{}
	n := 0
	for r, c := range cards {
		if r != o.Rank && (c.Host != o.Host || o.Transport == "tcp") {
			n++
			hosts[c.Host] = true
		}
	}
	if n > 0 {
		parts = append(parts, fmt.Sprintf("tcp %d peers on %d hosts", n, len(hosts)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func cma(threshold int) int {
	if threshold <= 0 {
		return -1
	}
	return threshold
}

func slotBytes(chunk int) int {
	if chunk <= 0 || chunk > 1<<20 {
		return 0
	}
	return max(chunk/4, 16<<10)
}

func timeLeft(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return max(time.Until(d), time.Millisecond)
	}
	return 0
}

// HostID returns this process's host identity: name (HCOMM_HOSTNAME) if
// not empty, else the host name joined with the network namespace and the
// boot id, so that processes in different network namespaces (or machines
// that happen to share a name) never count as one host.
func HostID(name string) string {
	if name != "" {
		return name
	}
	h, _ := os.Hostname()
	if ns, err := os.Readlink("/proc/self/ns/net"); err == nil {
		h += "/" + ns
	}
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		h += "/" + strings.TrimSpace(string(b))
	}
	return h
}

// MachineID returns the kernel's boot id, or "" where there is none.
func MachineID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// ListenAddress decides where to listen and what to advertise: addr
// (HCOMM_SOCKET_ADDR: an address, or several comma-separated) if set; else
// the first IPv4 address of every up interface matching ifname
// (HCOMM_SOCKET_IFNAME: prefixes, "=name" for exact names, "^" in front to
// exclude, comma-separated); else the local address of the route to the
// store host followed by those of the other up interfaces that are neither
// loopback nor a local bridge or tunnel (DefaultExclude); with a file store
// (no store host) or a store on loopback, loopback. Each advertised address
// is a network path to this rank: with more than one, advertise is a
// comma-separated list and listen is "" (every interface).
func ListenAddress(storeHost, addr, ifname string) (listen, advertise string, err error) {
	if a := addr; a != "" {
		var hosts []string
		for _, h := range strings.Split(a, ",") {
			h = strings.TrimSpace(h)
			if hh, _, err := net.SplitHostPort(h); err == nil {
				h = hh
			}
			if h != "" {
				hosts = append(hosts, h)
			}
		}
		return listenOn(hosts)
	}
	if spec := ifname; spec != "" {
		ips, err := interfaceIPs(func(name string) bool { return ifMatch(spec, name) })
		if err != nil {
			return "", "", err
		}
		if len(ips) == 0 {
			return "", "", fmt.Errorf("HCOMM_SOCKET_IFNAME=%q matches no up interface with an IPv4 address", spec)
		}
		return listenOn(ips)
	}
	if storeHost == "" {
		// A file store says nothing about the network: stay on loopback
		// unless told which interface the hosts share.
		return "127.0.0.1", "127.0.0.1", nil
	}
	// The address this host would use to reach the store is one the
	// other ranks can reach too. Dialing UDP sends nothing.
	c, err := net.Dial("udp", net.JoinHostPort(storeHost, "9"))
	if err != nil {
		return "", "", fmt.Errorf("no route to the store host %s: %w", storeHost, err)
	}
	defer c.Close()
	primary := c.LocalAddr().(*net.UDPAddr).IP
	if primary.IsLoopback() {
		return primary.String(), primary.String(), nil
	}
	hosts := []string{primary.String()}
	more, _ := interfaceIPs(func(name string) bool { return ifMatch(DefaultExclude, name) })
	for _, ip := range more {
		if ip != hosts[0] && !net.ParseIP(ip).IsLoopback() {
			hosts = append(hosts, ip)
		}
	}
	return listenOn(hosts)
}

// DefaultExclude is the HCOMM_SOCKET_IFNAME spec of the interfaces that are
// not paths to other hosts by default: loopback, and the bridges, virtual
// ends and tunnels of containers and virtual machines, which often carry
// the same addresses on every host.
const DefaultExclude = "^lo,docker,virbr,lxcbr,br-,veth,cni,flannel,cali,vxlan,tun,tap"

// maxPaths is the most addresses advertised (tcp.MaxPaths).
const maxPaths = tcp.MaxPaths

func listenOn(hosts []string) (listen, advertise string, err error) {
	if len(hosts) > maxPaths {
		hosts = hosts[:maxPaths]
	}
	if len(hosts) == 1 {
		return hosts[0], hosts[0], nil
	}
	return "", strings.Join(hosts, ","), nil
}

// interfaceIPs returns the first IPv4 address of every up interface whose
// name match accepts, in the system's interface order.
func interfaceIPs(match func(string) bool) ([]string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, ifc := range ifs {
		if !match(ifc.Name) || ifc.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				ips = append(ips, ipn.IP.String())
				break
			}
		}
	}
	return ips, nil
}

// LinkRate returns the speed, in bytes/s, of the link of the interface
// holding ip, from sysfs; 0 if unknown.
func LinkRate(ip net.IP) float64 {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	for _, ifc := range ifs {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(ip) {
				b, err := os.ReadFile("/sys/class/net/" + ifc.Name + "/speed")
				if err != nil {
					return 0
				}
				mbps, err := strconv.Atoi(strings.TrimSpace(string(b)))
				if err != nil || mbps <= 0 {
					return 0
				}
				return float64(mbps) * 125e3
			}
		}
	}
	return 0
}

// ifMatch applies an HCOMM_SOCKET_IFNAME spec to an interface name.
func ifMatch(spec, name string) bool {
	exclude := strings.HasPrefix(spec, "^")
	spec = strings.TrimPrefix(spec, "^")
	exact := strings.HasPrefix(spec, "=")
	spec = strings.TrimPrefix(spec, "=")
	hit := false
	for _, p := range strings.Split(spec, ",") {
		if p == "" {
			continue
		}
		if exact && name == p || !exact && strings.HasPrefix(name, p) {
			hit = true
		}
	}
	return hit != exclude
}

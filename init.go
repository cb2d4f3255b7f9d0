package hcomm

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/hcomm-go/hcomm/internal/algo"
	"github.com/hcomm-go/hcomm/internal/boot"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/settings"
	"github.com/hcomm-go/hcomm/internal/transport/local"
)

// DefaultConnectTimeout bounds Init's rendezvous and connections when
// HCOMM_CONNECT_TIMEOUT does not say otherwise.
const DefaultConnectTimeout = 2 * time.Minute

// Init joins the job this process is a rank of and returns the world
// communicator.
//
// It reads the rank and size from Config (when Config.Size > 0) or the
// environment: HCOMM_RANK and HCOMM_SIZE, or torchrun's RANK and
// WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE,
// Slurm's SLURM_PROCID and SLURM_NTASKS, PMI's (MPICH hydra) PMI_RANK and
// PMI_SIZE, or a Kubernetes Indexed Job's JOB_COMPLETION_INDEX with
// HCOMM_SIZE. A process started without any of them is a job of one rank.
//
// The ranks meet through the store HCOMM_STORE names (tcp://host:port or
// file:///dir; `hcomm run` sets it), or, torchrun style, through
// MASTER_ADDR and MASTER_PORT, where rank 0 serves the store itself.
// HCOMM_TOKEN is the job's secret: store clients and TCP peers without it
// are refused. Ranks on the same host (same host name and network
// namespace, or the same HCOMM_HOSTNAME) talk through shared memory, the
// others through TCP; HCOMM_TRANSPORT=tcp forces TCP everywhere.
//
// Init gives up after HCOMM_CONNECT_TIMEOUT (default 2m) or when ctx ends.
func Init(ctx context.Context, cfg *Config) (*Comm, error) {
	vals, set, err := resolve(cfg)
	if err != nil {
		return nil, &OpError{Op: "Init", Peer: -1, Err: err}
	}
	jc, err := readJob(cfg, vals, set)
	if err != nil {
		return nil, &OpError{Op: "Init", Rank: jc.Rank, Peer: -1, Err: err}
	}
	vals.Log(set.log)
	if err := bindSelf(vals.BindTo, jc.LocalRank, vals.LocalSize); err != nil {
		return nil, &OpError{Op: "Init", Rank: jc.Rank, Peer: -1, Err: err}
	}
	var tf *traceFile
	if vals.Trace != "" {
		if tf, err = openTrace(vals.Trace, jc.Rank, set.observer); err != nil {
			return nil, &OpError{Op: "Init", Rank: jc.Rank, Peer: -1, Err: err}
		}
		set.observer = tf.observer()
	}
	if jc.Size == 1 && jc.StoreURL == "" && jc.Store == nil {
		f := local.NewFabric(1)
		boot.Banner(set.log, jc, nil, nil)
		c := newComm(0, 1, "world", set, f.Endpoint(0), nil, f, plan.MemoryModel)
		c.trace = tf
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, jc.Connect)
	defer cancel()
	c, err := initWorld(ctx, jc, set, topologySettings{off: vals.Topology == "off", file: vals.RankTable, affinity: vals.CPUAffinity})
	if err != nil {
		tf.close()
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("%w after %v (HCOMM_CONNECT_TIMEOUT): %w", ErrTimeout, jc.Connect, err)
		}
		return nil, &OpError{Op: "Init", Rank: jc.Rank, Peer: -1, Err: err}
	}
	c.trace = tf
	return c, nil
}

func initWorld(ctx context.Context, jc boot.JobConfig, set options, ts topologySettings) (*Comm, error) {
	j, err := boot.OpenJob(ctx, jc)
	if err != nil {
		return nil, err
	}
	t, remote, err := j.Connect(ctx, "world", jc.Rank, jc.Size)
	if err != nil {
		j.Close()
		return nil, err
	}
	m := plan.MemoryModel
	if remote {
		m = plan.NetworkModel
	}
	card := discover(jc, set.log)
	layout, tp, err := worldLayout(ctx, j.Store(), jc, ts, card, set.log)
	var inter *algo.Link
	if err == nil && remote && layout != nil && len(layout.Hosts) > 1 {
		if l, ok := interLink(tp); ok {
			// Calibrated from the links: flat algorithms are costed
			// with it too, here and in communicators split off.
			inter = &l
			m.Alpha, m.Beta = l.Alpha, l.Beta
		}
	}
	if err == nil {
		set.pollCPUs, err = pollCPUs(ts.affinity, card)
	}
	if err != nil {
		t.Close()
		j.Close()
		return nil, err
	}
	c := newComm(jc.Rank, jc.Size, "world", set, t, j, nil, m)
	c.ownsJob = true
	var hosts [][]int
	if layout != nil {
		hosts = layout.Hosts
	}
	boot.Banner(set.log, jc, j, hosts)
	if layout != nil {
		if err := c.pl.SetLayout(*layout); err != nil {
			c.Close()
			return nil, err
		}
		if inter != nil {
			c.pl.SetInterLink(*inter)
		}
	}
	return c, nil
}

// readJob decides, from the Config and the settings, how this process
// joins its job.
func readJob(cfg *Config, v settings.Values, set options) (boot.JobConfig, error) {
	var j boot.JobConfig
	var err error
	if cfg != nil && cfg.Size > 0 {
		j.Rank, j.Size = cfg.Rank, cfg.Size
		if j.Rank < 0 || j.Rank >= j.Size {
			return j, invalid("Config.Rank %d outside [0, %d)", j.Rank, j.Size)
		}
	} else if j.Rank, j.Size, err = rankSize(v); err != nil {
		return j, err
	} else {
		j.Launcher = v.Launcher
	}
	j.LocalRank = v.LocalRank
	if cfg != nil {
		j.StoreURL, j.Token, j.Store = cfg.Store, cfg.Token, cfg.Rendezvous
	}
	if j.StoreURL == "" {
		j.StoreURL = v.Store
	}
	if j.Token == "" {
		j.Token = v.Token
	}
	if j.StoreURL == "" && j.Store == nil && v.MasterAddr != "" {
		j.StoreURL = "tcp://" + net.JoinHostPort(v.MasterAddr, v.MasterPort)
		j.HostStore = net.JoinHostPort("", v.MasterPort)
		if isLoopback(v.MasterAddr) {
			// Ranks that meet on loopback are all on this host: serve
			// the store there only.
			j.HostStore = net.JoinHostPort(v.MasterAddr, v.MasterPort)
		}
	}
	if j.Size > 1 && j.StoreURL == "" && j.Store == nil {
		return j, invalid("rank %d of %d has no rendezvous store: set HCOMM_STORE (tcp://host:port or file:///dir) or MASTER_ADDR/MASTER_PORT, or start the job with `hcomm run`", j.Rank, j.Size)
	}
	j.Connect = v.ConnectTimeout
	o := &j.Options
	o.Transport, o.NSocks, o.ChunkBytes = v.Transport, v.NSocks, set.chunk
	o.Yield, o.TCPPoll, o.Checksum, o.Logger = v.Yield, v.TCPPoll, v.Checksum, set.log
	o.KeepProcs = v.ProcsSet
	o.PathWeights, o.TCPDead, o.PathStall = v.PathWeights, v.TCPDead, v.PathStall
	// Single-copy shared memory (process_vm_readv) is off by default: on
	// the machines measured so far the two-copy ring, with both cores
	// copying, moves large messages about twice as fast.
	if v.ShmCMA > 0 {
		o.CMAThreshold = max(v.ShmCMA, 128<<10+1)
	}
	o.Host = boot.HostID(v.Hostname)
	storeHost := ""
	if u, err := url.Parse(j.StoreURL); err == nil && u.Scheme != "file" {
		storeHost = u.Hostname()
	}
	if o.ListenHost, o.AdvertiseHost, err = boot.ListenAddress(storeHost, v.SocketAddr, v.SocketIfname); err != nil {
		return j, err
	}
	if j.Token == "" && j.Size > 1 {
		// A job without a secret is open to whoever reaches its store or
		// data ports: fine on loopback, refused elsewhere unless asked for.
		exposed := !isLoopback(o.ListenHost) || (storeHost != "" && !isLoopback(storeHost))
		if exposed && !v.Insecure {
			return j, invalid("rank %d of %d has no secret token, and its store or data ports (%s) are reachable from other hosts: "+
				"set HCOMM_TOKEN to the same random secret on every rank (e.g. HCOMM_TOKEN=$(openssl rand -hex 32)), "+
				"or start the job with `hcomm run`, or serve the store with `hcomm store --env-file FILE`, which make one; "+
				"HCOMM_INSECURE=1 joins without one", j.Rank, j.Size, o.ListenHost)
		}
		if exposed {
			set.log.Warn("hcomm: joining without a secret token (HCOMM_INSECURE): anyone who can reach the store or this rank's data port can join the job or read its data",
				"rank", j.Rank, "listen", o.ListenHost)
		}
		// Loopback only, or insecure by request: tie the job to what the
		// launchers provide.
		j.Token = v.JobID + "/" + j.StoreURL
	}
	o.Token = sha256.Sum256([]byte(j.Token))
	return j, nil
}

// isLoopback reports whether host (a name or an address) is this
// machine's loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// rankSize is the rank and size the launchers' variables set.
func rankSize(v settings.Values) (rank, size int, err error) {
	if v.RankErr != nil {
		return 0, 0, invalid("%v", v.RankErr)
	}
	return v.Rank, v.Size, nil
}

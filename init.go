package hcomm

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/hcomm-go/hcomm/internal/boot"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/settings"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/internal/transport/local"
	"github.com/hcomm-go/hcomm/store"
)

// DefaultConnectTimeout bounds Init's rendezvous and connections when
// HCOMM_CONNECT_TIMEOUT does not say otherwise.
const DefaultConnectTimeout = settings.DefaultConnectTimeout

// job is what Init learns from the Config and the environment.
type job struct {
	rank, size  int
	storeURL    string
	hostStore   string // address rank 0 serves the store on (torchrun style), or ""
	token       string
	connect     time.Duration
	transport   string
	nsocks      int
	cma         int
	yield       int
	tcpPoll     time.Duration // 0: default, < 0: off
	checksum    bool
	hostID      string
	listen, adv string
}

// Init joins the job this process is a rank of and returns the world
// communicator.
//
// It reads the rank and size from Config (when Config.Size > 0) or the
// environment: HCOMM_RANK and HCOMM_SIZE, or torchrun's RANK and
// WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE,
// Slurm's SLURM_PROCID and SLURM_NTASKS. A process started without any of
// them is a job of one rank.
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
	j, err := readJob(cfg, vals)
	if err != nil {
		return nil, &OpError{Op: "Init", Rank: j.rank, Peer: -1, Err: err}
	}
	vals.Log(set.log)
	if j.size == 1 && j.storeURL == "" {
		f := local.NewFabric(1)
		return newComm(0, 1, "world", set, f.Endpoint(0), localBoot{f}, plan.MemoryModel), nil
	}
	ctx, cancel := context.WithTimeout(ctx, j.connect)
	defer cancel()
	c, err := initWorld(ctx, j, set)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("%w after %v (HCOMM_CONNECT_TIMEOUT): %w", ErrTimeout, j.connect, err)
		}
		return nil, &OpError{Op: "Init", Rank: j.rank, Peer: -1, Err: err}
	}
	return c, nil
}

func initWorld(ctx context.Context, j job, set options) (*Comm, error) {
	var srv *store.Server
	if j.hostStore != "" && j.rank == 0 {
		var err error
		srv, err = store.NewServer(store.ServerConfig{Token: j.token, Logger: set.log})
		if err == nil {
			err = srv.Listen(j.hostStore)
		}
		if err != nil {
			return nil, fmt.Errorf("rank 0 cannot serve the store on %s: %w", j.hostStore, err)
		}
	}
	st, err := store.Open(ctx, j.storeURL, j.token)
	if err != nil {
		if srv != nil {
			srv.Close()
		}
		return nil, fmt.Errorf("cannot reach the store %s: %w", j.storeURL, err)
	}
	sb := &storeBoot{st: st, srv: srv, j: j, set: set}
	t, remote, err := sb.connect(ctx, "world", j.rank, j.size)
	if err != nil {
		sb.close()
		return nil, err
	}
	m := plan.MemoryModel
	if remote {
		m = plan.NetworkModel
	}
	sb.watch = newWatcher(st, j.rank)
	c := newComm(j.rank, j.size, "world", set, t, sb, m)
	c.owns = sb
	return c, nil
}

// storeBoot builds transports through the job's store (Init and Split).
type storeBoot struct {
	st    store.Store
	srv   *store.Server
	j     job
	set   options
	watch *watcher       // answers dump requests for culprit reports
	notes sync.WaitGroup // failure notes being published
}

func (b *storeBoot) connect(ctx context.Context, id string, rank, size int) (transport.Transport, bool, error) {
	res, err := boot.Connect(ctx, boot.Options{Rank: rank, Size: size, Store: b.st, CommID: id,
		Token: sha256.Sum256([]byte(b.j.token)), Transport: b.j.transport, Host: b.j.hostID,
		ListenHost: b.j.listen, AdvertiseHost: b.j.adv, NSocks: b.j.nsocks,
		ChunkBytes: b.set.chunk, CMAThreshold: b.j.cma, Yield: b.j.yield, TCPPoll: b.j.tcpPoll, Checksum: b.j.checksum, Logger: b.set.log})
	if err != nil {
		return nil, false, err
	}
	return res.Transport, res.Remote, nil
}

func (b *storeBoot) sub(ctx context.Context, key string, rank, size int) (transport.Transport, bootstrap, error) {
	ctx, cancel := context.WithTimeout(ctx, b.j.connect)
	defer cancel()
	t, _, err := b.connect(ctx, key, rank, size)
	return t, b, err
}

// storeLinger bounds how long a rank that serves the job's store (rank 0,
// torchrun style) keeps it up at Close for ranks still using it.
const storeLinger = 10 * time.Second

func (b *storeBoot) close() {
	b.notes.Wait() // each is bounded by its own timeout
	// Say this rank is done with the store; the rank serving it waits,
	// for a bounded time, until every rank has said so.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	b.st.Add(ctx, "hcomm/closed", 1)
	cancel()
	if b.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeLinger)
		for {
			n, err := b.st.Add(ctx, "hcomm/closed", 0)
			if err != nil || n >= int64(b.j.size) {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
				continue
			}
			break
		}
		cancel()
	}
	if b.watch != nil {
		b.st.Close() // unblocks the watcher's wait
		b.watch.stop()
	}
	b.st.Close()
	if b.srv != nil {
		b.srv.Close()
	}
}

func readJob(cfg *Config, v settings.Values) (job, error) {
	var j job
	var err error
	if cfg != nil && cfg.Size > 0 {
		j.rank, j.size = cfg.Rank, cfg.Size
		if j.rank < 0 || j.rank >= j.size {
			return j, invalid("Config.Rank %d outside [0, %d)", j.rank, j.size)
		}
	} else if j.rank, j.size, err = rankSize(v); err != nil {
		return j, err
	}
	if cfg != nil {
		j.storeURL, j.token = cfg.Store, cfg.Token
	}
	if j.storeURL == "" {
		j.storeURL = v.Store
	}
	if j.token == "" {
		j.token = v.Token
	}
	if j.storeURL == "" && v.MasterAddr != "" {
		addr := net.JoinHostPort(v.MasterAddr, v.MasterPort)
		j.storeURL = "tcp://" + addr
		j.hostStore = net.JoinHostPort("", v.MasterPort)
	}
	if j.size > 1 && j.storeURL == "" {
		return j, invalid("rank %d of %d has no rendezvous store: set HCOMM_STORE (tcp://host:port or file:///dir) or MASTER_ADDR/MASTER_PORT, or start the job with `hcomm run`", j.rank, j.size)
	}
	if j.token == "" && j.size > 1 {
		// Without a secret anyone who can reach the store can join; tie
		// the job to what the launchers provide, and say so.
		j.token = v.JobID + "/" + j.storeURL
	}
	j.connect = v.ConnectTimeout
	j.tcpPoll = v.TCPPoll
	j.transport = v.Transport
	j.nsocks = v.NSocks
	// Single-copy shared memory (process_vm_readv) is off by default: on
	// the machines measured so far the two-copy ring, with both cores
	// copying, moves large messages about twice as fast.
	if v.ShmCMA > 0 {
		j.cma = max(v.ShmCMA, 128<<10+1)
	}
	j.yield = v.Yield
	j.checksum = v.Checksum
	j.hostID = boot.HostID(v.Hostname)
	storeHost := ""
	if u, err := url.Parse(j.storeURL); err == nil && u.Scheme == "tcp" {
		storeHost = u.Hostname()
	}
	if j.listen, j.adv, err = boot.ListenAddress(storeHost, v.SocketAddr, v.SocketIfname); err != nil {
		return j, err
	}
	return j, nil
}

// rankSize is the rank and size the launchers' variables set.
func rankSize(v settings.Values) (rank, size int, err error) {
	if v.RankErr != nil {
		return 0, 0, invalid("%v", v.RankErr)
	}
	return v.Rank, v.Size, nil
}

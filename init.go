package hcomm

import (
	"context"
	"fmt"
	"time"

	"github.com/hcomm-go/hcomm/internal/boot"
	"github.com/hcomm-go/hcomm/internal/plan"
	"github.com/hcomm-go/hcomm/internal/settings"
	"github.com/hcomm-go/hcomm/internal/topo"
	"github.com/hcomm-go/hcomm/internal/transport/local"
	"github.com/hcomm-go/hcomm/internal/world"
	"github.com/hcomm-go/hcomm/store"
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
	var rendezvous store.Store
	if cfg != nil {
		rendezvous = cfg.Rendezvous
	}
	jc, err := boot.ReadJob(settings.FromConfig(cfg), rendezvous, vals, set.chunk, set.Log)
	if err == nil {
		vals.Log(set.Log)
		err = topo.BindSelf(vals.BindTo, jc.LocalRank, vals.LocalSize)
	}
	var tf *traceFile
	if err == nil && vals.Trace != "" {
		if tf, err = openTrace(vals.Trace, jc.Rank, set.observer); err == nil {
			set.observer = tf.observer()
		}
	}
	if err != nil {
		return nil, &OpError{Op: "Init", Rank: jc.Rank, Peer: -1, Err: err}
	}
	if jc.Size == 1 && jc.StoreURL == "" && jc.Store == nil {
		f := local.NewFabric(1)
		boot.Banner(set.Log, jc, nil, nil)
		c := newComm(0, 1, "world", set, f.Endpoint(0), nil, f, plan.MemoryModel)
		c.trace = tf
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, jc.Connect)
	defer cancel()
	c, err := initWorld(ctx, jc, set, vals)
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

// initWorld joins the job and makes its world communicator.
func initWorld(ctx context.Context, jc boot.JobConfig, set options, v settings.Values) (*Comm, error) {
	w, err := world.Join(ctx, jc, v, set.Log)
	if err != nil {
		return nil, err
	}
	set.pollCPUs = w.PollCPUs
	c := newComm(jc.Rank, jc.Size, "world", set, w.Transport, w.Job, nil, w.Model)
	c.ownsJob = true
	boot.Banner(set.Log, jc, w.Job, w.Hosts)
	if err := w.Plan(c.path.Pl); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

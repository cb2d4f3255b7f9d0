package boot

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hcomm-go/hcomm/internal/diag"
	"github.com/hcomm-go/hcomm/internal/notice"
	"github.com/hcomm-go/hcomm/internal/transport"
	"github.com/hcomm-go/hcomm/store"
)

// Job is this process's membership of a multi-process job: the store the
// ranks meet through (served by this process, torchrun style, when it is
// rank 0 of such a job), the options every communicator's transport is
// built with, the watcher that answers dump requests, and the failure
// notes and notices (internal/notice). Communicators made by NewLocal have none.
type Job struct {
	st      store.Store
	srv     *store.Server
	opts    Options // Store, Rank, Size and CommID are set per communicator
	size    int
	connect time.Duration
	log     *slog.Logger
	watch   *diag.Watcher
	peers   string // the world communicator's Result.Peers
}

// JobConfig is what OpenJob needs.
type JobConfig struct {
	Rank, Size int
	StoreURL   string
	// Store, when set, is the program's own store (Config.Rendezvous),
	// used instead of StoreURL and left open at Close.
	Store     store.Store
	HostStore string // address to serve the store on at rank 0 (torchrun style), or ""
	Token     string // the job secret, for the store
	Launcher  string // whose variables gave the rank and size, for the logs
	LocalRank int    // the rank within the host a launcher gave, or -1; for the logs
	// Connect bounds each later communicator's connection (Split).
	Connect time.Duration
	// Options is the template of every communicator's transport options
	// (Rank, Size, Store and CommID are filled in per communicator).
	Options Options
}

// OpenJob reaches the job's store (serving it first when asked) and starts
// answering dump requests.
func OpenJob(ctx context.Context, cfg JobConfig) (*Job, error) {
	log := cfg.Options.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var srv *store.Server
	if cfg.HostStore != "" && cfg.Rank == 0 {
		var err error
		srv, err = store.NewServer(store.ServerConfig{Token: cfg.Token, Logger: log})
		if err == nil {
			err = srv.Listen(cfg.HostStore)
		}
		if err != nil {
			return nil, fmt.Errorf("rank 0 cannot serve the store on %s: %w", cfg.HostStore, err)
		}
	}
	var st store.Store
	var err error
	if cfg.Store != nil {
		st = store.WithPrefix(cfg.Store, "") // closing it leaves the program's store open
	} else if st, err = store.Open(ctx, cfg.StoreURL, cfg.Token); err != nil {
		if srv != nil {
			srv.Close()
		}
		return nil, fmt.Errorf("cannot reach the store %s: %w", store.Redact(cfg.StoreURL), err)
	}
	// A store left over from an earlier job fails here, at once, rather
	// than after the connect timeout with that job's addresses.
	if err := store.JoinJob(ctx, st, cfg.Rank); err != nil {
		st.Close()
		if srv != nil {
			srv.Close()
		}
		return nil, err
	}
	j := &Job{st: st, srv: srv, opts: cfg.Options, size: cfg.Size, connect: cfg.Connect, log: log}
	j.watch = diag.NewWatcher(st, cfg.Rank)
	return j, nil
}

// Connect builds rank's transport for communicator id of size ranks, and
// says whether some peer is on another host.
func (j *Job) Connect(ctx context.Context, id string, rank, size int) (transport.Transport, bool, error) {
	o := j.opts
	o.Rank, o.Size, o.Store, o.CommID = rank, size, j.st, id
	res, err := Connect(ctx, o)
	if err != nil {
		return nil, false, err
	}
	if id == "world" {
		j.peers = res.Peers
	}
	return res.Transport, res.Remote, nil
}

// Peers says which transport reaches which peers of the world
// communicator, once it is connected.
func (j *Job) Peers() string { return j.peers }

// Sub is Connect for a communicator derived later (Split), bounded by the
// job's connect timeout.
func (j *Job) Sub(ctx context.Context, id string, rank, size int) (transport.Transport, error) {
	if j.connect > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, j.connect)
		defer cancel()
	}
	t, _, err := j.Connect(ctx, id, rank, size)
	return t, err
}

// Store returns the job's store.
func (j *Job) Store() store.Store { return j.st }

// Attach makes s, a communicator of the job, part of this process's
// answers to dump requests, and runs watch (its failure-notice watcher) on
// a goroutine of its own. The returned detach takes s out, then cancels
// watch's ctx and waits for watch to return.
func (j *Job) Attach(s diag.Source, watch func(ctx context.Context)) (detach func()) {
	j.watch.Add(s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watch(ctx)
	}()
	return func() {
		j.watch.Remove(s)
		cancel()
		<-done
	}
}

// Report is diag.Report through the job's store and log.
func (j *Job) Report(id string, rank int, members []int, what string, explain func([]*diag.CommState) string) string {
	return diag.Report(j.st, j.log, id, rank, members, what, explain)
}

// States is diag.States through the job's store.
func (j *Job) States(id string, members []int, wait time.Duration) ([]*diag.CommState, error) {
	return diag.States(j.st, id, members, wait)
}

// PublishFailure stores n as the failure note of world rank world of
// communicator id and, if it is the communicator's first, as its notice
// (see internal/notice). It returns once they are stored, or after at most
// 500 ms, so that the news outlives a process that exits right after its
// error.
func (j *Job) PublishFailure(id string, world int, n notice.Note) {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	notice.Publish(ctx, j.st, id, world, n)
}

// LostNoteWait bounds how long a rank that lost a peer waits for that
// peer's own account of its failure.
const LostNoteWait = 300 * time.Millisecond

// FailureNote returns what world rank world of communicator id (of size
// ranks) published about its own failure, if it did within LostNoteWait.
func (j *Job) FailureNote(id string, world, size int) (notice.Note, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), LostNoteWait)
	defer cancel()
	n, err := notice.Lookup(ctx, j.st, id, world, size)
	return n, err == nil
}

// WatchNotice waits for communicator id's failure notice, until ctx ends.
func (j *Job) WatchNotice(ctx context.Context, id string, size int) (notice.Note, error) {
	return notice.Watch(ctx, j.st, id, size)
}

// storeLinger bounds how long a rank that serves the job's store (rank 0,
// torchrun style) keeps it up at Close for ranks still using it.
const storeLinger = 10 * time.Second

// Close says this rank is done with the store and (serving it) waits a
// bounded time for every rank to say so before stopping the server.
func (j *Job) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	j.st.Add(ctx, "hcomm/closed", 1)
	cancel()
	if j.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), storeLinger)
		for {
			n, err := j.st.Add(ctx, "hcomm/closed", 0)
			if err != nil || n >= int64(j.size) {
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
	j.st.Close() // unblocks the watcher's wait
	j.watch.Stop()
	if j.srv != nil {
		j.srv.Close()
	}
}

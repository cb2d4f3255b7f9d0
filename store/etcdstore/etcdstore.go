// Package etcdstore keeps a job's rendezvous data in etcd: it implements
// store.Store on go.etcd.io/etcd/client/v3, for clusters that already run
// etcd and would rather not run a store server for each job.
//
// It is a module of its own, so that programs that do not use it do not
// link gRPC. Importing it registers the etcd URL scheme with store.Open, and
// so with hcomm.Init:
//
//	import _ "github.com/hcomm-go/hcomm/store/etcdstore"
//
//	HCOMM_STORE=etcd://10.0.0.1:2379/jobs/job42
//
// Every key lives under the URL's path, the job's prefix, so jobs sharing
// one etcd cluster do not see each other's keys; give each job its own
// prefix (a store that served a job is refused by the next one). Each Store
// holds an etcd lease that it renews while it is open: the keys it wrote
// disappear one TTL (Config.TTL, ?ttl= in the URL) after its process dies or
// closes it, so a dead job leaves nothing behind.
//
// Access control is etcd's own (user and password in the URL, or a client
// with TLS through Config.Client); the hcomm job token is not used.
package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hcomm-go/hcomm/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Config configures a Store.
type Config struct {
	// Endpoints are the etcd servers, host:port or URLs. Ignored when
	// Client is set.
	Endpoints []string
	// Username and Password authenticate to etcd when its auth is on.
	Username, Password string
	// Client is an etcd client to use instead of dialling Endpoints. The
	// Store does not close it.
	Client *clientv3.Client

	// Prefix is the job's key space: every key is stored as Prefix + "/" +
	// key. It must not be empty.
	Prefix string
	// TTL is the lifetime of the Store's lease: keys it wrote are deleted
	// this long after it stops renewing the lease (its process died or
	// it was closed). Zero means DefaultTTL.
	TTL time.Duration
	// MaxValueSize is the largest value Set accepts. Zero means
	// DefaultMaxValueSize, which etcd's default request limit (1.5 MiB)
	// allows.
	MaxValueSize int
	// DialTimeout bounds the first connection to etcd. Zero means 10
	// seconds.
	DialTimeout time.Duration
}

// Defaults.
const (
	DefaultTTL          = 60 * time.Second
	DefaultMaxValueSize = 1 << 20
)

// Store is a store.Store kept in etcd. It is safe for concurrent use.
type Store struct {
	cli      *clientv3.Client
	ownsCli  bool
	prefix   string
	lease    clientv3.LeaseID
	maxValue int

	life   context.Context // ends at Close
	cancel context.CancelFunc
	once   sync.Once
	kaDone chan struct{} // closed when the keep-alive goroutine ends
}

var _ store.Store = (*Store)(nil)

func init() {
	store.Register("etcd", openURL)
}

// openURL opens etcd://[user:password@]host:port/prefix[?ttl=30s&endpoints=h2:2379,h3:2379].
func openURL(ctx context.Context, u *url.URL, token string) (store.Store, error) {
	bad := func(why string) error {
		return fmt.Errorf("store: bad store URL %q: %s; want etcd://host:port/prefix", u.Redacted(), why)
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, bad("no host")
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix == "" {
		return nil, bad("no prefix (the path names the job's key space)")
	}
	cfg := Config{Endpoints: []string{u.Host}, Prefix: prefix}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	q := u.Query()
	for k, v := range q {
		switch k {
		case "ttl":
			d, err := time.ParseDuration(v[0])
			if err != nil || d <= 0 {
				return nil, bad("ttl=" + v[0] + " is not a positive duration")
			}
			cfg.TTL = d
		case "endpoints":
			for _, e := range strings.Split(v[0], ",") {
				if e != "" {
					cfg.Endpoints = append(cfg.Endpoints, e)
				}
			}
		default:
			return nil, bad("unknown parameter " + k)
		}
	}
	return New(ctx, cfg)
}

// New connects to etcd and returns a Store under cfg.Prefix, holding a fresh
// lease of cfg.TTL.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Prefix == "" {
		return nil, errors.New("etcdstore: empty Prefix")
	}
	if cfg.TTL < 0 || cfg.MaxValueSize < 0 || cfg.DialTimeout < 0 {
		return nil, fmt.Errorf("etcdstore: negative TTL %v, MaxValueSize %d or DialTimeout %v", cfg.TTL, cfg.MaxValueSize, cfg.DialTimeout)
	}
	ttl := cfg.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	s := &Store{cli: cfg.Client, prefix: cfg.Prefix + "/", maxValue: cfg.MaxValueSize, kaDone: make(chan struct{})}
	if s.maxValue == 0 {
		s.maxValue = DefaultMaxValueSize
	}
	if s.cli == nil {
		if len(cfg.Endpoints) == 0 {
			return nil, errors.New("etcdstore: no Endpoints and no Client")
		}
		dt := cfg.DialTimeout
		if dt == 0 {
			dt = 10 * time.Second
		}
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: cfg.Endpoints, Username: cfg.Username, Password: cfg.Password,
			DialTimeout: dt, Logger: zap.NewNop(),
		})
		if err != nil {
			return nil, fmt.Errorf("etcdstore: %w", err)
		}
		s.cli, s.ownsCli = cli, true
	}
	secs := int64((ttl + time.Second - 1) / time.Second)
	g, err := s.cli.Grant(ctx, secs)
	if err != nil {
		if s.ownsCli {
			s.cli.Close()
		}
		return nil, fmt.Errorf("etcdstore: cannot reach etcd at %v: grant a lease: %w", cfg.Endpoints, err)
	}
	s.lease = g.ID
	s.life, s.cancel = context.WithCancel(context.Background())
	ka, err := s.cli.KeepAlive(s.life, s.lease)
	if err != nil {
		s.cancel()
		if s.ownsCli {
			s.cli.Close()
		}
		return nil, fmt.Errorf("etcdstore: keep the lease alive: %w", err)
	}
	go func() {
		defer close(s.kaDone)
		for range ka {
		}
	}()
	return s, nil
}

// Lease returns the etcd lease the Store's keys are attached to.
func (s *Store) Lease() clientv3.LeaseID { return s.lease }

// Prefix returns the job's prefix, with its trailing "/".
func (s *Store) Prefix() string { return s.prefix }

// begin checks a call's key and returns a context that also ends at Close.
func (s *Store) begin(ctx context.Context, op, key string) (context.Context, context.CancelFunc, error) {
	if s.life.Err() != nil {
		return nil, nil, fmt.Errorf("%w: %s %q", store.ErrClosed, op, key)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, ctxError(op, key, err)
	}
	if len(key) > store.MaxKeySize {
		return nil, nil, fmt.Errorf("%w: %s: key of %d bytes exceeds %d", store.ErrTooLarge, op, len(key), store.MaxKeySize)
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.life, cancel)
	return ctx, func() { stop(); cancel() }, nil
}

// fail turns an etcd error into this package's: the caller's deadline or
// cancellation, Close, or a wrapped etcd error.
func (s *Store) fail(ctx context.Context, op, key string, err error) error {
	switch {
	case s.life.Err() != nil:
		return fmt.Errorf("%w: %s %q", store.ErrClosed, op, key)
	case ctx.Err() != nil:
		return ctxError(op, key, ctx.Err())
	}
	return fmt.Errorf("etcdstore: %s %q: %w", op, key, err)
}

func ctxError(op, key string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s %q: %w", store.ErrTimeout, op, key, err)
	}
	return fmt.Errorf("etcdstore: %s %q: %w", op, key, err)
}

// Set implements store.Store.
func (s *Store) Set(ctx context.Context, key string, value []byte) error {
	cctx, done, err := s.begin(ctx, "set", key)
	if err != nil {
		return err
	}
	defer done()
	if len(value) > s.maxValue {
		return fmt.Errorf("%w: set %q: value of %d bytes exceeds %d", store.ErrTooLarge, key, len(value), s.maxValue)
	}
	if _, err := s.cli.Put(cctx, s.prefix+key, string(value), clientv3.WithLease(s.lease)); err != nil {
		return s.fail(ctx, "set", key, err)
	}
	return nil
}

// Get implements store.Store: it reads the key and, when it is missing,
// watches it from the revision read.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	cctx, done, err := s.begin(ctx, "get", key)
	if err != nil {
		return nil, err
	}
	defer done()
	full := s.prefix + key
	r, err := s.cli.Get(cctx, full)
	if err != nil {
		return nil, s.fail(ctx, "get", key, err)
	}
	if len(r.Kvs) > 0 {
		return value(r.Kvs[0].Value), nil
	}
	v, err := s.watchPut(cctx, full, r.Header.Revision+1)
	if err != nil {
		return nil, s.fail(ctx, "get", key, err)
	}
	return v, nil
}

// watchPut waits for the first put of key at revision rev or later and
// returns the value put.
func (s *Store) watchPut(ctx context.Context, key string, rev int64) ([]byte, error) {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range s.cli.Watch(ctx, key, clientv3.WithRev(rev), clientv3.WithFilterDelete()) {
		if err := wr.Err(); err != nil {
			return nil, err
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut {
				return value(ev.Kv.Value), nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("watch ended")
}

// value returns a copy the caller may keep, never nil.
func value(v []byte) []byte { return append([]byte{}, v...) }

// Add implements store.Store with a compare-and-swap on the key's
// revision.
func (s *Store) Add(ctx context.Context, key string, delta int64) (int64, error) {
	cctx, done, err := s.begin(ctx, "add", key)
	if err != nil {
		return 0, err
	}
	defer done()
	full := s.prefix + key
	for {
		r, err := s.cli.Get(cctx, full)
		if err != nil {
			return 0, s.fail(ctx, "add", key, err)
		}
		var old, rev int64
		if len(r.Kvs) > 0 {
			kv := r.Kvs[0]
			if old, err = strconv.ParseInt(string(kv.Value), 10, 64); err != nil {
				return 0, fmt.Errorf("%w: add %q: value does not hold a decimal integer", store.ErrNotInteger, key)
			}
			rev = kv.ModRevision
		}
		sum := old + delta
		if (delta > 0 && sum < old) || (delta < 0 && sum > old) {
			return 0, fmt.Errorf("%w: add %q: adding %d to %d overflows int64", store.ErrNotInteger, key, delta, old)
		}
		t, err := s.cli.Txn(cctx).
			If(clientv3.Compare(clientv3.ModRevision(full), "=", rev)).
			Then(clientv3.OpPut(full, strconv.FormatInt(sum, 10), clientv3.WithLease(s.lease))).
			Commit()
		if err != nil {
			return 0, s.fail(ctx, "add", key, err)
		}
		if t.Succeeded {
			return sum, nil
		}
		// Another Add came in between: read again.
	}
}

// Wait implements store.Store: a key counts once it existed at the
// revision Wait started from or was put after it.
func (s *Store) Wait(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	for _, k := range keys[1:] {
		if len(k) > store.MaxKeySize {
			return fmt.Errorf("%w: wait: key of %d bytes exceeds %d", store.ErrTooLarge, len(k), store.MaxKeySize)
		}
	}
	cctx, done, err := s.begin(ctx, "wait", keys[0])
	if err != nil {
		return err
	}
	defer done()
	var rev int64
	var missing []string
	for i, k := range keys {
		var opts []clientv3.OpOption
		if i > 0 {
			opts = append(opts, clientv3.WithRev(rev)) // one snapshot
		}
		opts = append(opts, clientv3.WithCountOnly())
		r, err := s.cli.Get(cctx, s.prefix+k, opts...)
		if err != nil {
			return s.fail(ctx, "wait", k, err)
		}
		if i == 0 {
			rev = r.Header.Revision
		}
		if r.Count == 0 {
			missing = append(missing, k)
		}
	}
	for _, k := range missing {
		// Watches replay history from rev+1, so waiting for the keys
		// one after another misses none.
		if _, err := s.watchPut(cctx, s.prefix+k, rev+1); err != nil {
			return s.fail(ctx, "wait", k, err)
		}
	}
	return nil
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	cctx, done, err := s.begin(ctx, "delete", key)
	if err != nil {
		return err
	}
	defer done()
	if _, err := s.cli.Delete(cctx, s.prefix+key); err != nil {
		return s.fail(ctx, "delete", key, err)
	}
	return nil
}

// Close stops renewing the Store's lease, so that its keys expire one TTL
// later, and closes the etcd client it dialled. Pending and later calls
// fail with store.ErrClosed.
func (s *Store) Close() error {
	s.once.Do(func() {
		s.cancel()
		<-s.kaDone
		if s.ownsCli {
			s.cli.Close()
		}
	})
	return nil
}

// Revoke revokes the Store's lease at once, deleting every key the Store
// wrote, and closes it. A job's last rank may call it when the job's keys
// are no longer needed.
func (s *Store) Revoke(ctx context.Context) error {
	if s.life.Err() != nil {
		return fmt.Errorf("%w: revoke", store.ErrClosed)
	}
	_, err := s.cli.Revoke(ctx, s.lease)
	s.Close()
	if err != nil {
		return fmt.Errorf("etcdstore: revoke lease: %w", err)
	}
	return nil
}

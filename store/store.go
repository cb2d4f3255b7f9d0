// Package store provides the key-value store through which the ranks of a job
// find each other before they can talk directly.
//
// A job usually runs one Server inside rank 0 (or the launcher) and lets every
// rank connect to it with Dial; ranks that share a file system can use a
// FileStore instead. Open picks an implementation from a URL such as
// "tcp://10.0.0.1:29500" or "file:///shared/job42".
//
// All implementations satisfy Store: Set and Get move small byte values, Get
// and Wait block until keys appear, Add is an atomic counter. WithPrefix gives
// each communicator its own key space within one shared store.
//
// Every blocking call honours its context. A call that runs out of time fails
// with an error that unwraps to both ErrTimeout and context.DeadlineExceeded;
// a call on a closed store, or on a TCP client whose server went away, fails
// with an error that unwraps to ErrClosed.
//
// # Security
//
// A TCP server admits only clients that know the job token. Each side proves
// knowledge of it with an HMAC over fresh random nonces from both sides, the
// client first, so the token itself never crosses the network, a recorded
// proof cannot be replayed, a stranger who connects gets nothing to test
// token guesses against, and a client also refuses a server that does not
// know the token. Traffic is not encrypted: keep the store on a trusted
// network. Every frame's length is checked before it is read, and no input
// from the network can make either side panic or allocate more than it was
// sent.
//
// A server bounds what others can make it hold (see ServerConfig): the bytes
// of stored data and parked calls (MaxBytes), the connections still
// authenticating, in all and per source address, with the oldest closed
// first so clients that know the token still get in during a flood
// (MaxPending, MaxPendingPerSource), and the authenticated connections
// (MaxConns). It logs refusals at most once every few seconds per kind,
// with the count of those it left out.
//
// A FileStore trusts only a directory, and files in it, that belong to the
// current user and that no one else may write (see NewFileStore).
package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Store is a key-value store shared by the ranks of a job. Its methods are
// safe for concurrent use.
//
// Keys are arbitrary byte strings of at most MaxKeySize bytes. Values are
// arbitrary bytes; implementations may limit their size. A value returned by
// Get belongs to the caller.
type Store interface {
	// Set stores value under key, replacing any previous value, and wakes
	// the callers waiting for key.
	Set(ctx context.Context, key string, value []byte) error
	// Get returns the value of key, waiting until the key exists or ctx ends.
	Get(ctx context.Context, key string) ([]byte, error)
	// Add atomically adds delta to the integer stored under key and returns
	// the new value. The value is kept as decimal text, so Get of a counter
	// returns, for example, "42". A missing key counts as 0; a value that is
	// not a decimal integer makes Add fail with ErrNotInteger.
	Add(ctx context.Context, key string, delta int64) (int64, error)
	// Wait returns once every key in keys has been set (by Set or Add) since
	// Wait was called, or existed when it was called.
	Wait(ctx context.Context, keys ...string) error
	// Delete removes key. Deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases the store's resources. Calls in progress and later
	// calls fail with ErrClosed.
	Close() error
}

// MaxKeySize is the longest key, in bytes, that a Store accepts.
const MaxKeySize = 4 << 10

// DefaultMaxValueSize is the largest value a TCP store server or client
// accepts when its configuration does not say otherwise.
const DefaultMaxValueSize = 64 << 20

// Sentinel errors. Errors returned by this package wrap them; test with
// errors.Is.
var (
	// ErrClosed reports a call on a store that was closed, or on a client
	// whose connection to the server was lost.
	ErrClosed = errors.New("store: closed")
	// ErrUnauthorized reports that the server and the client do not share
	// the same job token.
	ErrUnauthorized = errors.New("store: unauthorized")
	// ErrTimeout reports that a call's context deadline passed. Such
	// errors also unwrap to context.DeadlineExceeded.
	ErrTimeout = errors.New("store: timed out")
	// ErrTooLarge reports a key or value beyond the store's limits.
	ErrTooLarge = errors.New("store: key or value too large")
	// ErrNotPrivate reports a file store directory, or a file in it, that
	// belongs to another user or that group or others may write.
	ErrNotPrivate = errors.New("store: not private to this user")
	// ErrNotInteger reports an Add on a key whose value is not a decimal
	// integer, or an Add that would overflow int64.
	ErrNotInteger = errors.New("store: value is not an integer")
)

// ctxError turns the error of an ended context into this package's error for
// operation op on key: deadlines become ErrTimeout (still unwrapping to
// context.DeadlineExceeded), cancellation stays context.Canceled.
func ctxError(op, key string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s %q: %w", ErrTimeout, op, key, err)
	}
	return fmt.Errorf("store: %s %q: %w", op, key, err)
}

// checkKey reports whether key is acceptable to every Store.
func checkKey(op, key string) error {
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: %s: key of %d bytes exceeds %d", ErrTooLarge, op, len(key), MaxKeySize)
	}
	return nil
}

// Open connects to the store named by rawURL:
//
//	tcp://host:port   a TCP store server (see Dial); token is the job token
//	file:///abs/dir   a FileStore in a directory shared by the ranks
//
// and any scheme registered with Register, such as etcd:// when the program
// imports github.com/hcomm-go/hcomm/store/etcdstore.
//
// For a file store, token is not used: access is governed by the
// directory's permissions. Open of a TCP store waits, until ctx ends, for the
// server to come up.
func Open(ctx context.Context, rawURL string, token string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("store: bad store URL: %w", err)
	}
	switch u.Scheme {
	case "tcp":
		if u.Opaque != "" || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return nil, fmt.Errorf("store: bad store URL %q: want tcp://host:port", rawURL)
		}
		c, err := Dial(ctx, u.Host, &ClientConfig{Token: token})
		if err != nil {
			return nil, err
		}
		return c, nil
	case "file":
		if u.Opaque != "" || (u.Host != "" && u.Host != "localhost") || u.Path == "" || u.RawQuery != "" {
			return nil, fmt.Errorf("store: bad store URL %q: want file:///absolute/dir", rawURL)
		}
		fs, err := NewFileStore(filepath.FromSlash(u.Path))
		if err != nil {
			return nil, err
		}
		return fs, nil
	}
	registry.Lock()
	open := registry.m[u.Scheme]
	registry.Unlock()
	if open == nil {
		return nil, fmt.Errorf("store: bad store URL %q: scheme must be tcp or file%s", Redact(rawURL), registeredSchemes())
	}
	return open(ctx, u, token)
}

// An Opener opens the store a URL of its scheme names; token is the job
// token (an implementation with its own access control may ignore it).
type Opener func(ctx context.Context, u *url.URL, token string) (Store, error)

var registry struct {
	sync.Mutex
	m map[string]Opener
}

// Register makes Open hand URLs of scheme to open. A package providing a
// store calls it from its init function, so that importing the package is
// enough:
//
//	import _ "github.com/hcomm-go/hcomm/store/etcdstore" // etcd://host:2379/prefix
//
// Register panics if scheme is tcp, file or already registered.
func Register(scheme string, open Opener) {
	registry.Lock()
	defer registry.Unlock()
	if scheme == "tcp" || scheme == "file" || registry.m[scheme] != nil {
		panic("store: Register of scheme " + scheme + " twice")
	}
	if registry.m == nil {
		registry.m = make(map[string]Opener)
	}
	registry.m[scheme] = open
}

func registeredSchemes() string {
	registry.Lock()
	defer registry.Unlock()
	var names []string
	for s := range registry.m {
		names = append(names, s)
	}
	if len(names) == 0 {
		return " (or a scheme whose package the program imports, such as etcd with github.com/hcomm-go/hcomm/store/etcdstore)"
	}
	slices.Sort(names)
	return " or " + strings.Join(names, ", ")
}

// Redact returns rawURL with any password replaced by "xxxxx", for error
// messages and logs.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

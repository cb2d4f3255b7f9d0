package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// FileStore is a Store kept in a directory that all ranks can reach, such
// as a shared NFS mount or, for ranks of one host, a local directory.
//
// Each key is a file named after the key (escaped, so any key is safe).
// Set writes a temporary file and renames it into place, so readers see
// either the old value or the new one, never a mix. Set, Add and Delete
// hold an exclusive lock on the directory's lock file while they work,
// which makes Add atomic across processes. Get and Wait poll, with growing
// pauses up to 50ms.
//
// Values are not synced to stable storage: the store is meant for
// rendezvous, not for keeping data across a machine crash.
type FileStore struct {
	dir       string
	lockSem   chan struct{} // serializes this FileStore's own lockers
	done      chan struct{}
	closeOnce sync.Once
}

const (
	lockFileName = ".lock"
	tempPrefix   = ".tmp-"
	minPoll      = time.Millisecond
	maxPoll      = 50 * time.Millisecond
	maxLockPoll  = 5 * time.Millisecond
)

// NewFileStore returns a store kept in dir, creating the directory (mode
// 0700) if needed. Several FileStores, in one process or many, may share
// dir.
//
// On Unix the directory must belong to the current user and must not be
// writable by group or others, and so must every value file the store reads:
// otherwise another user could plant a rank's address or change a value.
// NewFileStore and the calls that read such a file fail with an error
// wrapping ErrNotPrivate. (Other users may still be allowed to read the
// directory; ranks of different users sharing one store is not supported.)
func NewFileStore(dir string) (*FileStore, error) {
	if dir == "" {
		return nil, errors.New("store: empty file store directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("store: %s is not a directory", dir)
	}
	if err := checkPrivate(dir, fi); err != nil {
		return nil, err
	}
	return &FileStore{dir: dir, lockSem: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

// Dir returns the store's directory.
func (s *FileStore) Dir() string { return s.dir }

func (s *FileStore) path(key string) string { return filepath.Join(s.dir, fileName(key)) }

func (s *FileStore) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// begin checks what every call checks first.
func (s *FileStore) begin(ctx context.Context, op, key string) error {
	if s.closed() {
		return fmt.Errorf("%w: %s %q", ErrClosed, op, key)
	}
	if err := ctx.Err(); err != nil {
		return ctxError(op, key, err)
	}
	return checkKey(op, key)
}

// poll calls try until it reports done, pausing between attempts (at most
// maxPause), and gives up when ctx ends or the store closes.
func (s *FileStore) poll(ctx context.Context, op, key string, maxPause time.Duration, try func() (bool, error)) error {
	pause := minPoll
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		done, err := try()
		if err != nil || done {
			return err
		}
		if t == nil {
			t = time.NewTimer(pause)
		} else {
			t.Reset(pause)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctxError(op, key, ctx.Err())
		case <-s.done:
			return fmt.Errorf("%w: %s %q", ErrClosed, op, key)
		}
		pause = min(pause*3/2+time.Millisecond, maxPause)
	}
}

// locked runs f while holding the directory's lock. Callers in this
// process queue on lockSem; other processes are kept out by the lock file.
func (s *FileStore) locked(ctx context.Context, op, key string, f func() error) error {
	select {
	case s.lockSem <- struct{}{}:
	case <-ctx.Done():
		return ctxError(op, key, ctx.Err())
	case <-s.done:
		return fmt.Errorf("%w: %s %q", ErrClosed, op, key)
	}
	defer func() { <-s.lockSem }()
	var l *dirLock
	err := s.poll(ctx, op, key, maxLockPoll, func() (bool, error) {
		var err error
		l, err = tryLock(filepath.Join(s.dir, lockFileName))
		if err != nil {
			return false, fmt.Errorf("store: %s %q: lock: %w", op, key, err)
		}
		return l != nil, nil
	})
	if err != nil {
		return err
	}
	defer l.unlock()
	return f()
}

// writeFile atomically replaces the value of key.
func (s *FileStore) writeFile(key string, value []byte) error {
	f, err := os.CreateTemp(s.dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	_, err = f.Write(value)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), s.path(key))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// readValue reads the file of key, refusing one that another user could
// have written.
func (s *FileStore) readValue(key string) ([]byte, error) {
	path := s.path(key)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkPrivate(path, fi); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// Set implements Store.
func (s *FileStore) Set(ctx context.Context, key string, value []byte) error {
	if err := s.begin(ctx, "set", key); err != nil {
		return err
	}
	return s.locked(ctx, "set", key, func() error {
		if err := s.writeFile(key, value); err != nil {
			return fmt.Errorf("store: set %q: %w", key, err)
		}
		return nil
	})
}

// Get implements Store.
func (s *FileStore) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.begin(ctx, "get", key); err != nil {
		return nil, err
	}
	var value []byte
	err := s.poll(ctx, "get", key, maxPoll, func() (bool, error) {
		v, err := s.readValue(key)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("store: get %q: %w", key, err)
		}
		value = v
		return true, nil
	})
	return value, err
}

// Add implements Store.
func (s *FileStore) Add(ctx context.Context, key string, delta int64) (int64, error) {
	if err := s.begin(ctx, "add", key); err != nil {
		return 0, err
	}
	var sum int64
	err := s.locked(ctx, "add", key, func() error {
		var old int64
		v, err := s.readValue(key)
		switch {
		case err == nil:
			if old, err = strconv.ParseInt(string(v), 10, 64); err != nil {
				return fmt.Errorf("%w: add %q: value does not hold a decimal integer", ErrNotInteger, key)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("store: add %q: %w", key, err)
		}
		sum = old + delta
		if (delta > 0 && sum < old) || (delta < 0 && sum > old) {
			return fmt.Errorf("%w: add %q: adding %d to %d overflows int64", ErrNotInteger, key, delta, old)
		}
		if err := s.writeFile(key, strconv.AppendInt(nil, sum, 10)); err != nil {
			return fmt.Errorf("store: add %q: %w", key, err)
		}
		return nil
	})
	return sum, err
}

// Wait implements Store. A key counts as set once Wait has seen its file.
func (s *FileStore) Wait(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	for _, k := range keys {
		if err := s.begin(ctx, "wait", k); err != nil {
			return err
		}
	}
	left := keys
	return s.poll(ctx, "wait", keys[0], maxPoll, func() (bool, error) {
		for len(left) > 0 {
			_, err := os.Stat(s.path(left[0]))
			if errors.Is(err, fs.ErrNotExist) {
				return false, nil
			}
			if err != nil {
				return false, fmt.Errorf("store: wait %q: %w", left[0], err)
			}
			left = left[1:]
		}
		return true, nil
	})
}

// Delete implements Store.
func (s *FileStore) Delete(ctx context.Context, key string) error {
	if err := s.begin(ctx, "delete", key); err != nil {
		return err
	}
	return s.locked(ctx, "delete", key, func() error {
		if err := os.Remove(s.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("store: delete %q: %w", key, err)
		}
		return nil
	})
}

// Close makes pending and later calls fail with ErrClosed. It leaves the
// directory and its contents in place.
func (s *FileStore) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	return nil
}

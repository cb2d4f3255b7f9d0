//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package store

import (
	"errors"
	"os"
	"syscall"
)

// dirLock is a held lock on a FileStore's lock file.
type dirLock struct{ f *os.File }

// tryLock takes an exclusive flock on path without waiting. It returns nil
// and no error when another holder has it. Each call opens the file afresh,
// so goroutines of one process exclude each other as processes do.
func tryLock(path string) (*dirLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	return &dirLock{f}, nil
}

func (l *dirLock) unlock() { l.f.Close() }

//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import (
	"errors"
	"io/fs"
	"os"
)

// dirLock is a held lock on a FileStore's lock file.
//
// Where flock is not available the lock is the existence of the file,
// created exclusively; a process that dies holding it leaves it behind and
// the file must then be removed by hand.
type dirLock struct{ path string }

// tryLock creates path exclusively. It returns nil and no error when the
// file exists already.
func tryLock(path string) (*dirLock, error) {
	path += ".excl"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f.Close()
	return &dirLock{path}, nil
}

func (l *dirLock) unlock() { os.Remove(l.path) }

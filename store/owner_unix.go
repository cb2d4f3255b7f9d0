//go:build unix

package store

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// checkPrivate reports an error wrapping ErrNotPrivate unless fi, the
// result of a Stat of path, belongs to the current user and cannot be
// written by group or others. A file store trusts what it reads from its
// directory (ranks' addresses, for one), so anything another user could
// have placed or changed is refused.
func checkPrivate(path string, fi fs.FileInfo) error {
	what := "file"
	if fi.IsDir() {
		what = "directory"
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if me := os.Geteuid(); int64(st.Uid) != int64(me) {
			return fmt.Errorf("%w: %s %s belongs to uid %d, not to this user (uid %d); use a directory that only you own",
				ErrNotPrivate, what, path, st.Uid, me)
		}
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("%w: %s %s is writable by group or others (mode %04o); remove that (chmod go-w %s) or use a private directory",
			ErrNotPrivate, what, path, perm, path)
	}
	return nil
}

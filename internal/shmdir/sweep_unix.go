//go:build unix

package shmdir

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Alive reports whether process pid exists (it may belong to another
// user: only "no such process" counts as gone).
func Alive(pid int) bool { return unix.Kill(pid, 0) != unix.ESRCH }

// SweepStale removes the files of dir named prefix<pid>-… whose creator
// pid no longer exists and that were last modified at least minAge ago,
// calling removed (if not nil) for each one removed.
func SweepStale(dir, prefix string, minAge time.Duration, removed func(name string, pid int)) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || Alive(pid) {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < minAge {
			continue
		}
		if os.Remove(filepath.Join(dir, e.Name())) == nil && removed != nil {
			removed(e.Name(), pid)
		}
	}
}

package shm

import (
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// setPtracer registers pid as the process allowed to ptrace this one
// (and so to read its memory with process_vm_readv) where Yama restricts
// ptrace to ancestors. A variable for tests.
var setPtracer = func(pid int) error {
	return unix.Prctl(unix.PR_SET_PTRACER, uintptr(pid), 0, 0, 0)
}

// allowPeerReads lets the local peers read this process's memory for
// single-copy messages, and nobody else: see ptracerFor. It returns the
// pid registered, or 0 if none was.
func (t *Transport) allowPeerReads() int {
	self := os.Getpid()
	var peers []int
	for j := range t.local {
		if j != t.me {
			peers = append(peers, t.seg.pid(j))
		}
	}
	pid := ptracerFor(self, peers, parentPid)
	if pid == 0 {
		t.log.Debug("shm: no common ancestor of the local peers to name as ptracer; where Yama restricts ptrace, their single-copy reads fall back to the ring", "peers", peers)
		return 0
	}
	// The call fails harmlessly without Yama.
	_ = setPtracer(pid)
	return pid
}

// ptracerFor decides which process to name as this one's ptracer so that
// the peers may read its memory. Yama keeps one ptracer per process, but
// lets the named process and its descendants trace: a single peer is named
// itself; several peers are named through their nearest common ancestor
// other than init (the launcher, as a rule: hcomm run, torchrun, mpirun),
// which admits the job's local ranks and the launcher's other descendants
// rather than every process of the user. With no such ancestor it returns
// 0, names nobody, and the peers' reads fall back to the ring where Yama
// refuses them.
func ptracerFor(self int, peers []int, parent func(int) (int, error)) int {
	distinct := map[int]bool{}
	for _, p := range peers {
		if p > 0 && p != self {
			distinct[p] = true
		}
	}
	if len(distinct) == 0 {
		return 0
	}
	if len(distinct) == 1 {
		for p := range distinct {
			return p
		}
	}
	// Ancestors of the first peer, nearest first; then the nearest of
	// them that every other peer descends from.
	var chain []int
	var first int
	for p := range distinct {
		first = p
		break
	}
	for p := first; p > 1 && len(chain) < 64; {
		pp, err := parent(p)
		if err != nil || pp <= 1 {
			break
		}
		chain = append(chain, pp)
		p = pp
	}
	for _, a := range chain {
		all := true
		for p := range distinct {
			if p != first && !descends(p, a, parent) {
				all = false
				break
			}
		}
		if all {
			return a
		}
	}
	return 0
}

// descends reports whether process p descends from a.
func descends(p, a int, parent func(int) (int, error)) bool {
	for i := 0; p > 1 && i < 64; i++ {
		pp, err := parent(p)
		if err != nil {
			return false
		}
		if pp == a {
			return true
		}
		p = pp
	}
	return false
}

// parentPid returns the parent of process pid, from /proc.
func parentPid(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold anything: skip past
	// its last ')'; the state and then the parent's pid follow.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, os.ErrInvalid
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0, os.ErrInvalid
	}
	return strconv.Atoi(f[1])
}

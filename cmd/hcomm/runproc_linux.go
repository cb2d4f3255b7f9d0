//go:build linux

package main

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// rankSysProcAttr puts a rank in a process group of its own, so that
// signals reach everything it starts, and has the kernel signal it if the
// launcher dies. A local rank gets SIGKILL; an rsh command gets SIGTERM, so
// that it can close its connection and let the remote side notice.
func rankSysProcAttr(local bool) *syscall.SysProcAttr {
	sig := syscall.SIGKILL
	if !local {
		sig = syscall.SIGTERM
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: sig}
}

// waitExited blocks until the child pid has ended, without reaping it: as
// long as it stays a zombie its pid, and so its process group id, cannot be
// reused, and the group can safely be signalled.
func waitExited(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// signalGroup sends sig to the process group pgid.
func signalGroup(pgid int, sig syscall.Signal) error {
	return syscall.Kill(-pgid, sig)
}

const launcherSupported = true

// signalNames are the conventional names of the signals a rank is likely to
// die of or the launcher to receive.
var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGXCPU: "SIGXCPU", syscall.SIGSYS: "SIGSYS",
}

//go:build !linux

package main

import (
	"errors"
	"syscall"
)

var errNotLinux = errors.New("hcomm run needs Linux")

func rankSysProcAttr(bool) *syscall.SysProcAttr { return nil }

func waitExited(int) error { return errNotLinux }

func signalGroup(int, syscall.Signal) error { return errNotLinux }

const launcherSupported = false

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM",
}

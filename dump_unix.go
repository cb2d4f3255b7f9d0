//go:build unix

package hcomm

import (
	"os"
	"strings"
	"syscall"
)

// dumpSignal is the signal HCOMM_DUMP_SIGNAL names, or nil.
func dumpSignal() os.Signal {
	switch strings.TrimPrefix(strings.ToUpper(os.Getenv("HCOMM_DUMP_SIGNAL")), "SIG") {
	case "USR1":
		return syscall.SIGUSR1
	case "USR2":
		return syscall.SIGUSR2
	}
	return nil
}

//go:build unix

package diag

import (
	"os"
	"syscall"
)

// Signal is the signal HCOMM_DUMP_SIGNAL names ("USR1" or "USR2"), or
// nil.
func Signal(name string) os.Signal {
	switch name {
	case "USR1":
		return syscall.SIGUSR1
	case "USR2":
		return syscall.SIGUSR2
	}
	return nil
}

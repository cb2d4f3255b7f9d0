//go:build !unix

package hcomm

import "os"

// dumpSignal: no dump signal outside Unix.
func dumpSignal(string) os.Signal { return nil }

//go:build !unix

package diag

import "os"

// Signal: no dump signal outside Unix.
func Signal(string) os.Signal { return nil }

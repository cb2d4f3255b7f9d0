//go:build !linux

package topo

// LocalHomeNode returns -1: placement is done only on Linux.
func LocalHomeNode() int { return -1 }

// Place does nothing outside Linux.
func Place(b []byte, node int) error { return nil }

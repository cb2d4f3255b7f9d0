//go:build !linux

package main

// currentCPU returns -1: where the thread runs is not known here, and
// settling waits its whole bound.
func currentCPU() int { return -1 }

//go:build !linux

package main

// cpu returns -1: the CPU is not known here.
func cpu() int64 { return -1 }

//go:build !unix

package hcomm

func cpuTime() int64 { return 0 }

//go:build !linux

package main

// currentCPU returns -1: where the thread runs is not known here, so
// ranksApart takes the ranks as apart, and settling ends settledRounds
// rounds after settleFor.
func currentCPU() int { return -1 }

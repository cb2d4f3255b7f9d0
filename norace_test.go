//go:build !race

package hcomm

const raceEnabled = false

//go:build race

package algo

// raceEnabled trims the larger sweeps when the race detector slows tests.
const raceEnabled = true

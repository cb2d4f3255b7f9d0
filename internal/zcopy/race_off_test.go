//go:build !race

package zcopy

const raceEnabled = false

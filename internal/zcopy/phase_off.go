//go:build !zcopyphase

package zcopy

// phases holds nothing in ordinary builds: the marks of a call's phases
// exist only in builds with the zcopyphase tag (phase_on.go).
type phases struct{}

// mark is a no-op in ordinary builds.
func (r *Registry) mark(int) {}

// Phases returns zeros in ordinary builds.
func (r *Registry) Phases() [phN]int64 { return [phN]int64{} }

// PhaseTrace reports whether the build stamps phases.
const PhaseTrace = false

func (r *Registry) phaseFlush() {}

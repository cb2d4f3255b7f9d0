package zcopy

// The phases of a symmetric call, stamped (Registry.mark) only in builds
// with the zcopyphase tag: see phase_on.go.
const (
	phBegin = iota
	phSent1
	phMet
	phMoved
	phSent2
	phOwn
	phDone
	phN
)

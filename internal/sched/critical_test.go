package sched

import (
	"strings"
	"testing"
)

func prog(rank, size int, steps ...Step) *Program {
	return &Program{Rank: rank, Size: size, Steps: steps}
}

func TestCriticalPath(t *testing.T) {
	in := func(n int) Region { return R(In, 0, n) }
	outR := func(off, n int) Region { return R(Out, off, n) }
	tests := []struct {
		name  string
		progs []*Program
		rates Rates
		want  float64
	}{
		{"one message", []*Program{
			prog(0, 2, st(SendOp(1, in(10)))),
			prog(1, 2, st(RecvOp(0, outR(0, 10)))),
		}, Rates{Alpha: 1, Beta: 0.5}, 6},
		{"exchange is full duplex", []*Program{
			prog(0, 2, st(SendOp(1, in(4)), RecvOp(1, outR(0, 4)))),
			prog(1, 2, st(SendOp(0, in(4)), RecvOp(0, outR(0, 4)))),
		}, Rates{Alpha: 1, Beta: 1}, 5},
		{"one port: a root receives one at a time", []*Program{
			prog(0, 4, st(RecvOp(1, outR(0, 2)), RecvOp(2, outR(2, 2)), RecvOp(3, outR(4, 2)))),
			prog(1, 4, st(SendOp(0, in(2)))),
			prog(2, 4, st(SendOp(0, in(2)))),
			prog(3, 4, st(SendOp(0, in(2)))),
		}, Rates{Alpha: 1, Beta: 1}, 9},
		{"rendezvous: a send waits for the receiver's step", []*Program{
			prog(0, 3, st(SendOp(2, in(1)))),
			prog(1, 3, st(SendOp(2, in(1)))),
			prog(2, 3, st(RecvOp(1, outR(0, 1))), st(RecvOp(0, outR(1, 1)))),
		}, Rates{Alpha: 1}, 2},
		{"reduce after receive, copies before messages", []*Program{
			prog(0, 2, st(CopyOp(in(3), outR(0, 3)), SendOp(1, in(3)))),
			prog(1, 2, st(RecvReduceOp(0, in(3), outR(0, 3)))),
		}, Rates{Alpha: 1, Gamma: 2, Delta: 10}, 30 + 1 + 6},
		{"forwarding is not pipelined", []*Program{
			prog(0, 3, st(SendOp(1, in(5)))),
			prog(1, 3, st(RecvCopySendOp(0, 2, outR(0, 5)))),
			prog(2, 3, st(RecvOp(1, outR(0, 5)))),
		}, Rates{Beta: 1}, 10},
	}
	for _, tt := range tests {
		got, err := CriticalPath(tt.progs, tt.rates)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: critical path %g, want %g", tt.name, got, tt.want)
		}
	}
}

func TestCriticalPathErrors(t *testing.T) {
	tests := []struct {
		name  string
		progs []*Program
		want  string
	}{
		{"unreceived", []*Program{prog(0, 2, st(SendOp(1, R(In, 0, 1)))), prog(1, 2)}, "never received"},
		{"unsent", []*Program{prog(0, 2), prog(1, 2, st(RecvOp(0, R(Out, 0, 1))))}, "more messages"},
		{"bad peer", []*Program{prog(0, 1, st(SendOp(3, R(In, 0, 1))))}, "sends to 3"},
		{"deadlock", []*Program{
			prog(0, 2, st(RecvOp(1, R(Out, 0, 1))), st(SendOp(1, R(In, 0, 1)))),
			prog(1, 2, st(RecvOp(0, R(Out, 0, 1))), st(SendOp(0, R(In, 0, 1)))),
		}, "cannot finish"},
		{"nil program", []*Program{nil}, "no program"},
	}
	for _, tt := range tests {
		if _, err := CriticalPath(tt.progs, Rates{Alpha: 1}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
}

func TestCriticalPathHosts(t *testing.T) {
	in := func(n int) Region { return R(In, 0, n) }
	outR := func(off, n int) Region { return R(Out, off, n) }
	// Ranks 0 and 1 each send 4 elements to rank 2 and rank 3.
	two := []*Program{
		prog(0, 4, st(SendOp(2, in(4)))),
		prog(1, 4, st(SendOp(3, in(4)))),
		prog(2, 4, st(RecvOp(0, outR(0, 4)))),
		prog(3, 4, st(RecvOp(1, outR(0, 4)))),
	}
	intra, inter := Rates{Alpha: 1, Beta: 1}, Rates{Alpha: 10, Beta: 10}
	tests := []struct {
		name  string
		progs []*Program
		host  []int
		want  float64
	}{
		{"one host", two, []int{0, 0, 0, 0}, 5},
		// Both messages leave host 0: they take turns on its link.
		{"two messages share a NIC", two, []int{0, 0, 1, 1}, 100},
		{"each host sends one", two, []int{0, 1, 1, 0}, 50},
		{"one crosses", two, []int{0, 0, 1, 0}, 50},
		{"exchange is full duplex", []*Program{
			prog(0, 2, st(SendOp(1, in(4)), RecvOp(1, outR(0, 4)))),
			prog(1, 2, st(SendOp(0, in(4)), RecvOp(0, outR(0, 4)))),
		}, []int{0, 1}, 50},
	}
	for _, tt := range tests {
		got, err := CriticalPathHosts(tt.progs, intra, Hosts{Host: tt.host, Inter: inter})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	// Every rank on its own host is CriticalPath at the inter-host rates
	// when no host sends two messages at once.
	for _, p := range [][]*Program{two} {
		a, _ := CriticalPath(p, inter)
		b, _ := CriticalPathHosts(p, intra, Hosts{Host: []int{0, 1, 2, 3}, Inter: inter})
		if a != b {
			t.Errorf("one rank per host: %v, CriticalPath %v", b, a)
		}
	}
	for _, host := range [][]int{{0, 0}, {0, 0, 0, -1}, {0, 0, 0, 4}} {
		if _, err := CriticalPathHosts(two, intra, Hosts{Host: host, Inter: inter}); err == nil {
			t.Errorf("hosts %v: no error", host)
		}
	}
}

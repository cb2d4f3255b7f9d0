package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestPlanCmd(t *testing.T) {
	var out, errb bytes.Buffer
	if err := planCmd([]string{"-n", "8", "-b", "8", "-e", "64M", "-f", "8"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	s := out.String()
	lines := strings.Split(strings.TrimSpace(s), "\n")
	// Header, column line, then 8 B … 64 MiB by 8: 9 sizes.
	if len(lines) != 2+9 {
		t.Fatalf("%d lines:\n%s", len(lines), s)
	}
	if !strings.Contains(lines[0], "memory model") || !strings.Contains(lines[1], "dbtree") {
		t.Errorf("header:\n%s", s)
	}
	// 8 bytes on one host: recursive doubling's few steps win on α; at
	// 64 MiB a bandwidth-optimal algorithm wins.
	if !strings.Contains(lines[2], "rd over") || !strings.Contains(lines[2], "α -") {
		t.Errorf("8 B row: %s", lines[2])
	}
	if last := lines[len(lines)-1]; strings.Contains(last, " rd over") {
		t.Errorf("64 MiB row picks rd: %s", last)
	}

	out.Reset()
	if err := planCmd([]string{"-n", "64", "-b", "1M", "-e", "1M", "-sim"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	s = out.String()
	for _, want := range []string{"network model", "8 host(s)", "hring*", "hier*", "; sim "} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

func TestPlanCmdErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "-3"}, "at least 1 rank"},
		{[]string{"-op", "x"}, "unknown collective"},
		{[]string{"-model", "quantum"}, "want auto, memory or network"},
		{[]string{"-e", "1Q"}, "bad size"},
		{[]string{"-f", "0"}, "at least 2"},
		{[]string{"-n", "4", "x"}, "unexpected argument"},
	} {
		var out, errb bytes.Buffer
		if err := planCmd(c.args, &out, &errb); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

package boot

import (
	"strings"
	"testing"
)

func TestIfMatch(t *testing.T) {
	for _, tt := range []struct {
		spec, name string
		want       bool
	}{
		{"eth", "eth0", true},
		{"eth", "ib0", false},
		{"eth,ib", "ib0", true},
		{"=eth0", "eth0", true},
		{"=eth0", "eth01", false},
		{"^eth", "eth0", false},
		{"^eth", "ib0", true},
		{"^=eth0", "eth01", true},
		{"^=eth0,ib0", "ib0", false},
		{DefaultExclude, "lo", false},
		{DefaultExclude, "docker0", false},
		{DefaultExclude, "eth1", true},
		{DefaultExclude, "enp1s0", true},
	} {
		if got := ifMatch(tt.spec, tt.name); got != tt.want {
			t.Errorf("ifMatch(%q, %q) = %v, want %v", tt.spec, tt.name, got, tt.want)
		}
	}
}

func TestListenAddress(t *testing.T) {
	for _, tt := range []struct {
		name                   string
		store, addr, ifname    string
		listen, advertise, err string
	}{
		{"one address", "", "10.0.0.1", "", "10.0.0.1", "10.0.0.1", ""},
		{"address with port", "", "10.0.0.1:99", "", "10.0.0.1", "10.0.0.1", ""},
		{"addresses", "", "10.0.0.1, 10.1.0.1:5", "", "", "10.0.0.1,10.1.0.1", ""},
		{"loopback by name", "", "", "=lo", "127.0.0.1", "127.0.0.1", ""},
		{"no interface", "", "", "=no-such-if", "", "", "matches no up interface"},
		{"file store", "", "", "", "127.0.0.1", "127.0.0.1", ""},
		{"store on loopback", "127.0.0.1", "", "", "127.0.0.1", "127.0.0.1", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, a, err := ListenAddress(tt.store, tt.addr, tt.ifname)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || l != tt.listen || a != tt.advertise {
				t.Errorf("ListenAddress = %q, %q, %v; want %q, %q", l, a, err, tt.listen, tt.advertise)
			}
		})
	}
}

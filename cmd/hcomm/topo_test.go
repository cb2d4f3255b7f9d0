package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSys writes a two-socket machine's /sys and /proc under a temporary
// directory.
func fakeSys(t *testing.T) string {
	root := t.TempDir()
	for name, data := range map[string]string{
		"proc/sys/kernel/hostname":                  "fakebox",
		"sys/devices/system/node/node0/cpulist":     "0-3",
		"sys/devices/system/node/node1/cpulist":     "4-7",
		"sys/class/net/ib0/speed":                   "100000",
		"sys/class/net/ib0/mtu":                     "4092",
		"sys/class/net/ib0/operstate":               "up",
		"sys/class/net/ib0/device/numa_node":        "1",
		"sys/class/net/lo/mtu":                      "65536",
		"sys/class/net/lo/operstate":                "unknown",
		"sys/devices/system/node/has_normal_memory": "0-1",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestTopoLocal(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := topoCmd([]string{"-sysfs", fakeSys(t)}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	for _, want := range []string{"topology: 1 rank on 1 host (from discovery)", "numa 1: cpus 4-7", "nic ib0: 100000 Mb/s, mtu 4092, numa 1, up", "ring: 0 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	file := filepath.Join(t.TempDir(), "hosts.topo")
	if err := os.WriteFile(file, []byte("host a slots 2\nhost b slots 2\nlink inter 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := topoCmd([]string{"-file", file}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	for _, want := range []string{"4 ranks on 2 hosts (from topology file", "ring: 0 1 2 3 (2 host crossings", "rail 1: ranks 1 3", "256M=hier"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := topoCmd([]string{"-file", filepath.Join(t.TempDir(), "none")}, &out, &errOut); err == nil {
		t.Error("a missing file is not an error")
	}
}

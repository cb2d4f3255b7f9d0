package boot

import (
	"strings"
	"testing"
)

func TestMachineAndHostID(t *testing.T) {
	m := MachineID()
	if m == "" {
		t.Skip("no /proc/sys/kernel/random/boot_id")
	}
	if MachineID() != m {
		t.Error("MachineID changed between calls")
	}
	if h := HostID(""); !strings.HasSuffix(h, "/"+m) {
		t.Errorf("HostID %q does not end with the boot id %q", h, m)
	}
	if h := HostID("node7"); h != "node7" {
		t.Errorf("HostID with HCOMM_HOSTNAME = %q, want node7", h)
	}
	if yieldSetting(true) <= 0 || yieldSetting(false) >= 0 {
		t.Error("yieldSetting does not force the decision")
	}
}

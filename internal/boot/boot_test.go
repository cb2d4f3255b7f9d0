package boot

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
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

// TestHostIDNamespaces: a process in another network namespace of this
// machine is another host (its own network stack) on the same kernel.
func TestHostIDNamespaces(t *testing.T) {
	if os.Getenv("HCOMM_TEST_HOSTID_CHILD") != "" {
		fmt.Printf("host=%s\nmachine=%s\n", HostID(""), MachineID())
		return
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 || MachineID() == "" {
		t.Skip("needs Linux, root and a boot id")
	}
	cmd := exec.Command("unshare", "--net", os.Args[0], "-test.run=^TestHostIDNamespaces$")
	cmd.Env = append(os.Environ(), "HCOMM_TEST_HOSTID_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("unshare --net: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "host="+HostID("")+"\n") && strings.Contains(string(out), "machine="+MachineID()+"\n") {
		return
	}
	t.Errorf("in a new network namespace: %s\nhere: host=%s machine=%s (want another host, the same machine)", out, HostID(""), MachineID())
}

func TestProcs(t *testing.T) {
	for _, tc := range []struct{ sharing, mine, cpus, procs, want int }{
		{1, 1, 2, 2, 2},    // alone
		{2, 1, 2, 2, 2},    // as many ranks as CPUs: left alone
		{4, 1, 2, 2, 1},    // four ranks in namespaces on two CPUs
		{4, 1, 2, 1, 1},    // already lowered (hcomm run's local ranks)
		{3, 1, 2, 8, 1},    // never below 1
		{16, 1, 8, 8, 1},   // twice as many ranks as CPUs
		{9, 1, 8, 8, 1},    // one rank too many
		{4, 1, 64, 64, 64}, // a big host with few ranks
		{4, 4, 2, 2, 2},    // every rank in this process: its share is every CPU
		{8, 4, 2, 2, 1},    // half the ranks here, on two CPUs
		{16, 8, 8, 8, 4},   // half the ranks here, on eight CPUs
		{4, 0, 2, 2, 1},    // mine unknown: counted as one
	} {
		if got := Procs(tc.sharing, tc.mine, tc.cpus, tc.procs); got != tc.want {
			t.Errorf("Procs(%d ranks, %d here, %d CPUs, GOMAXPROCS %d) = %d, want %d", tc.sharing, tc.mine, tc.cpus, tc.procs, got, tc.want)
		}
	}
}

func TestPollFor(t *testing.T) {
	for _, tc := range []struct {
		set     time.Duration
		oversub bool
		want    time.Duration
	}{
		{0, false, 0}, // the transport's default
		{0, true, OversubscribedPoll},
		{-1, true, -1}, // never poll, as set
		{time.Millisecond, true, time.Millisecond},
		{time.Millisecond, false, time.Millisecond},
	} {
		if got := pollFor(tc.set, tc.oversub); got != tc.want {
			t.Errorf("pollFor(%v, oversubscribed %v) = %v, want %v", tc.set, tc.oversub, got, tc.want)
		}
	}
}

// TestProcsChosen: a GOMAXPROCS the program set itself, other than the
// runtime's default, is told apart from the default and left in place.
func TestProcsChosen(t *testing.T) {
	orig := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(orig) })
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	if ProcsChosen(def) {
		t.Errorf("ProcsChosen(%d), the default: true", def)
	}
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Errorf("GOMAXPROCS after ProcsChosen of the default = %d, want %d", got, def)
	}
	chosen := def + 3
	runtime.GOMAXPROCS(chosen)
	if !ProcsChosen(chosen) {
		t.Errorf("ProcsChosen(%d) after runtime.GOMAXPROCS(%d), default %d: false", chosen, chosen, def)
	}
	if got := runtime.GOMAXPROCS(0); got != chosen {
		t.Errorf("GOMAXPROCS after ProcsChosen = %d, want the program's %d kept", got, chosen)
	}
}

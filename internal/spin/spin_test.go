package spin

import "testing"

func TestYieldCPU(t *testing.T) {
	for range 100 {
		YieldCPU()
	}
	if n := testing.AllocsPerRun(100, YieldCPU); n != 0 {
		t.Errorf("YieldCPU allocates %.0f times", n)
	}
}

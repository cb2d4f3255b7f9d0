package fusion

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hcomm-go/hcomm"
)

// childEnv makes this test binary a rank of TestMultiProcess's job.
const childEnv = "HCOMM_TEST_FUSION_CHILD"

// TestMultiProcess runs rankBucketer as 3 separate processes under
// `hcomm run`, over shared memory and over TCP.
func TestMultiProcess(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		rankProcess(t)
		return
	}
	if testing.Short() {
		t.Skip("starts processes")
	}
	launcher := filepath.Join(t.TempDir(), "hcomm")
	if out, err := exec.Command("go", "build", "-o", launcher, "github.com/hcomm-go/hcomm/cmd/hcomm").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/hcomm: %v\n%s", err, out)
	}
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, launcher, "run", "-n", "3", "--tag-output", "--timeout", "4m", "--",
				os.Args[0], "-test.run=^TestMultiProcess$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), childEnv+"=1", "HCOMM_TRANSPORT="+tr)
			if out, err := cmd.CombinedOutput(); err != nil {
				lines := strings.Split(string(out), "\n")
				t.Fatalf("%v\n%s", err, strings.Join(lines[max(len(lines)-80, 0):], "\n"))
			}
		})
	}
}

// rankProcess is one rank of TestMultiProcess's job.
func rankProcess(t *testing.T) {
	c, err := hcomm.Init(context.Background(), &hcomm.Config{Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rankBucketer(t, c)
}

// rankBucketer checks a Bucketer on a stream of the communicator against
// one AllReduce per tensor.
func rankBucketer(t *testing.T, c *hcomm.Comm) {
	ctx := context.Background()
	comm := c.NewStream("comm")
	defer comm.Close()
	// Bucketer against unfused AllReduce, bitwise (exact values).
	rng := rand.New(rand.NewPCG(11, 0))
	specs := randomSpecs(rng, 40)
	b := NewBucketer(c, Config{Threshold: 8 << 10, Stream: comm})
	tns := make([]*anyTensor, len(specs))
	gs := make([]*Grad, len(specs))
	for i, sp := range specs {
		tns[i] = makeTensor(sp)
		g, err := registerSpec(b, fmt.Sprint("t", i), sp, tns[i])
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	if err := b.Build(ctx); err != nil {
		t.Fatal(err)
	}
	for i, sp := range specs {
		if err := bindView(gs[i], sp, tns[i]); err != nil {
			t.Fatal(err)
		}
	}
	order := rand.New(rand.NewPCG(uint64(c.Rank()), 5)).Perm(len(specs))
	for _, i := range order {
		fillTensor(tns[i], specs[i], uint64(i*101+c.Rank()), true)
		if err := gs[i].Ready(); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for i, sp := range specs {
		want := makeTensor(sp)
		fillTensor(want, sp, uint64(i*101+c.Rank()), true)
		buf := want.bytes()
		if err := c.AllReduceBytes(ctx, buf, buf, sp.dt, hcomm.Sum); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(tns[i].bytes(), buf) {
			t.Fatalf("tensor %d: bucketed result differs from AllReduce", i)
		}
	}
}

package hcomm_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/hcomm-go/hcomm"
)

// Four ranks in one process sum their vectors.
func ExampleAllReduce() {
	ctx := context.Background()
	comms, err := hcomm.NewLocal(ctx, 4, nil)
	if err != nil {
		panic(err)
	}
	results := make([][]float32, len(comms))
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			r := float32(c.Rank())
			x := []float32{r, 10 * r, 100 * r}
			if err := hcomm.AllReduce(ctx, c, x, x, hcomm.Sum); err != nil { // in place
				panic(err)
			}
			results[c.Rank()] = x
		}()
	}
	wg.Wait()
	fmt.Println(results[0], results[3])
	// Output: [6 60 600] [6 60 600]
}

// Every rank contributes its rank number; every rank receives them all.
func ExampleAllGather() {
	ctx := context.Background()
	comms, _ := hcomm.NewLocal(ctx, 3, nil)
	out := make([][]int64, 3)
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			out[c.Rank()] = make([]int64, 2*c.Size())
			send := []int64{int64(c.Rank()), int64(c.Rank() * c.Rank())}
			if err := hcomm.AllGather(ctx, c, send, out[c.Rank()]); err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()
	fmt.Println(out[1])
	// Output: [0 0 1 1 2 4]
}

// Split makes a communicator of the even ranks and one of the odd ranks.
func ExampleComm_Split() {
	ctx := context.Background()
	comms, _ := hcomm.NewLocal(ctx, 4, nil)
	sums := make([]int32, 4)
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			sub, err := c.Split(ctx, c.Rank()%2, c.Rank())
			if err != nil {
				panic(err)
			}
			defer sub.Close()
			x := []int32{int32(c.Rank())}
			if err := hcomm.AllReduce(ctx, sub, x, x, hcomm.Sum); err != nil {
				panic(err)
			}
			sums[c.Rank()] = x[0]
		}()
	}
	wg.Wait()
	fmt.Println(sums)
	// Output: [2 4 2 4]
}

// A rank of a job over TCP reports how its traffic to each peer went over
// each network path (nothing is printed for peers on shared memory).
func ExampleComm_NetPaths() {
	ctx := context.Background()
	c, err := hcomm.Init(ctx, nil) // a rank of a job started by hcomm run
	if err != nil {
		panic(err)
	}
	defer c.Close()
	x := make([]float32, 1<<20)
	if err := hcomm.AllReduce(ctx, c, x, x, hcomm.Sum); err != nil {
		panic(err)
	}
	for _, p := range c.NetPaths() {
		fmt.Printf("peer %d path %d (%s -> %s): sent %d B, received %d B, rtt %v, share %.2f\n",
			p.Peer, p.Path, p.Local, p.Remote, p.Sent, p.Received, p.RTT, p.Share)
	}
}

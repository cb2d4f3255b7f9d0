// Package hcomm is collective communication for Go: many ranks — processes
// on one host or many, or goroutines of one process — combine and exchange
// buffers with AllReduce, AllGather, ReduceScatter, Broadcast, Reduce,
// AllToAll(V), Gather, Scatter, Send/Recv and Barrier, as NCCL, Gloo and MPI
// collectives do, in pure Go.
//
// # Getting a communicator
//
// A program started by a launcher calls Init, which reads its rank and the
// job's size from the environment:
//
//	c, err := hcomm.Init(ctx, nil)
//	if err != nil { ... }
//	defer c.Close()
//
// NewLocal makes n ranks inside one process (goroutines), for tests and
// single-process programs:
//
//	comms, err := hcomm.NewLocal(ctx, 4, nil)
//
// A nil *Config means defaults, overridable by HCOMM_ environment variables;
// see Config.
//
// # Collectives
//
// The collectives are generic functions over slices of any Element type
// (int8, uint8, int32, uint32, int64, uint64, Float16, BFloat16, float32,
// float64, and named types based on the integer and float ones):
//
//	grad := make([]float32, n)
//	err := hcomm.AllReduce(ctx, c, grad, grad, hcomm.Sum) // in place
//
// Every rank calls the same collectives in the same order with matching
// arguments. Each collective also has an untyped form on Comm over []byte
// plus a DType (AllReduceBytes, ...), for frameworks that hold raw buffers.
//
// In place: pass the same slice as send and recv (AllReduce, Reduce at the
// root, AllToAll(V)); for AllGather(V) and Gather pass as send the rank's
// own block of recv; for ReduceScatter(V) and Scatter pass as recv the
// rank's own block of send. Buffers that matter only at the root — Reduce's
// and Gather's recv, Scatter's send — may be nil on the other ranks.
//
// Reduction operators are Sum, Prod, Min, Max and Avg; see Op for their
// exact semantics on integers, NaN and signed zeros. Results are
// deterministic: the same inputs, algorithm and number of ranks give bitwise
// the same result on every rank and in every run.
//
// # Errors
//
// Every call takes a context and returns when it is done, failed, cancelled
// or past its deadline (the ctx's or Config.Timeout, whichever comes first).
// Errors are *OpError values naming the operation, the rank, the peer and
// the sequence number, and they unwrap to ErrTimeout, ErrAborted,
// ErrPeerLost, ErrMismatch, ErrClosed or ErrInvalidArgument:
//
//	if errors.Is(err, hcomm.ErrPeerLost) { ... }
//
// A failure during communication makes the communicator unusable, and the
// peers learn of it rather than waiting. Abort stops a communicator at once
// from any goroutine; Close releases it. Neither waits on a peer.
//
// # Streams, events and gradient fusion
//
// Work can run asynchronously, ordered like a device runtime's streams:
// a Stream executes what is enqueued on it in order on its own goroutine;
// s.Go enqueues computation, AllReduceAsync (and an Async form of every
// collective) enqueues communication, s.Record marks a point as an Event,
// and s.WaitEvent(e) makes later work on s wait for it without blocking the
// caller:
//
//	comm := c.NewStream("comm")
//	ready := compute.Record()           // gradients computed up to here
//	comm.WaitEvent(ready)
//	hcomm.AllReduceAsync(comm, c, grad, grad, hcomm.Avg)
//	done := comm.Record()
//	compute.WaitEvent(done)             // the optimizer step waits for the sum
//
// Errors stick to the stream and Synchronize returns them; a wait on an
// event that can never come (a dependency cycle, an event never recorded)
// times out naming the streams and events involved.
//
// A Bucketer (package hcomm/fusion) fuses many small tensors into large
// AllReduces, as data-parallel training does with gradients: tensors are
// registered once in the same order on every rank, grouped into buckets by
// size and type, and each bucket is reduced when all its tensors are ready
// (or when its time window expires). Bucket contents and launch order depend only on the
// registration, never on timing, so results are bitwise reproducible.
// examples/ddp is a complete data-parallel training program built on them.
//
// # Algorithms
//
// Each collective has several algorithms — ring, recursive doubling,
// Rabenseifner halving-doubling, double binary tree, binomial and pipelined
// chain trees, Bruck, pairwise exchange, dissemination — each a pure
// schedule verified symbolically for correctness and freedom from deadlock.
// A cost model picks one per call from the operation, the size and the
// number of ranks; HCOMM_ALGO or Config.Algo forces a choice.
package hcomm

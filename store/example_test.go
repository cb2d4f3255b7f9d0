package store_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hcomm-go/hcomm/store"
)

// Rank 0 runs the server; every rank, rank 0 included, connects to it,
// publishes its address and waits for everyone else's.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const token = "job-42-secret"

	srv, err := store.NewServer(store.ServerConfig{Token: token})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}

	// In a real job this runs in each rank's process, with the URL taken
	// from HCOMM_STORE.
	s, err := store.Open(ctx, "tcp://"+srv.Addr().String(), token)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	comm := store.WithPrefix(s, "comm0")
	if err := comm.Set(ctx, "addr/0", []byte("10.0.0.1:7000")); err != nil {
		log.Fatal(err)
	}
	if err := comm.Wait(ctx, "addr/0"); err != nil {
		log.Fatal(err)
	}
	addr, err := comm.Get(ctx, "addr/0")
	if err != nil {
		log.Fatal(err)
	}
	arrived, err := comm.Add(ctx, "arrived", 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rank 0 is at %s; %d rank(s) arrived\n", addr, arrived)
	// Output: rank 0 is at 10.0.0.1:7000; 1 rank(s) arrived
}

// A file store needs no server: ranks share a directory.
func ExampleNewFileStore() {
	ctx := context.Background()
	dir, cleanup := tempDir()
	defer cleanup()

	s, err := store.NewFileStore(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for range 3 {
		if _, err := s.Add(ctx, "barrier", 1); err != nil {
			log.Fatal(err)
		}
	}
	v, _ := s.Get(ctx, "barrier")
	fmt.Println(string(v))
	// Output: 3
}

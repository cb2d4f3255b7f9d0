package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// ErrReused reports a store that already served a job: a store's keys
// (ranks' addresses, shared-memory segment names) belong to one job, and a
// second job that met through the same store would find the first one's.
var ErrReused = errors.New("store: this store already served a job")

// Claim atomically claims key in s: it returns true for the first caller,
// in any process, and false for every later one. It is built on Add, which
// every Store makes atomic; the key then holds the number of claims.
func Claim(ctx context.Context, s Store, key string) (bool, error) {
	n, err := s.Add(ctx, key, 1)
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// JoinJob records that rank joined the job the store serves, and fails
// with an error wrapping ErrReused when that rank already joined through
// this store: the store is left over from an earlier job (or two processes
// claim the same rank). Init calls it before publishing anything, so that a
// reused store fails at once rather than after the connect timeout with the
// earlier job's addresses.
func JoinJob(ctx context.Context, s Store, rank int) error {
	first, err := Claim(ctx, s, "hcomm/job/rank/"+strconv.Itoa(rank))
	if err != nil {
		return fmt.Errorf("store: record that rank %d joined: %w", rank, err)
	}
	if !first {
		return fmt.Errorf("%w: rank %d already joined through it; start a new store for each job (hcomm run does), or a new prefix with etcd", ErrReused, rank)
	}
	return nil
}

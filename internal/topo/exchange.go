package topo

import (
	"context"
	"fmt"
	"strconv"

	"github.com/hcomm-go/hcomm/store"
)

// Exchange publishes this rank's card under kv and reads every rank's: one
// Set and size Gets, whatever the job's size. kv should be namespaced to
// one communicator (store.WithPrefix).
func Exchange(ctx context.Context, kv store.Store, rank, size int, me Card) ([]Card, error) {
	b, err := me.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if err := kv.Set(ctx, "topo/"+strconv.Itoa(rank), b); err != nil {
		return nil, fmt.Errorf("topology: publish rank %d's card: %w", rank, err)
	}
	cards := make([]Card, size)
	for r := range cards {
		// This rank's own card goes through the same decoding as the
		// others', so that every rank holds identical cards.
		v := b
		if r != rank {
			if v, err = kv.Get(ctx, "topo/"+strconv.Itoa(r)); err != nil {
				return nil, fmt.Errorf("topology: wait for rank %d's card: %w", r, err)
			}
		}
		if err := cards[r].UnmarshalBinary(v); err != nil {
			return nil, fmt.Errorf("topology: rank %d's card: %w", r, err)
		}
	}
	return cards, nil
}

package diag

import (
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/hcomm-go/hcomm/internal/errs"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ResultHash is the hash of a collective's result that HCOMM_CHECK_RESULTS
// compares across the ranks: CRC32C.
func ResultHash(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// CompareResults compares the ranks' result hashes (all[r] is rank r's):
// nil when they agree, else an error wrapping errs.ErrMismatch that names
// the ranks differing from rank 0.
func CompareResults(all []uint32) error {
	var differ []string
	for r, h := range all {
		if h != all[0] {
			differ = append(differ, fmt.Sprintf("rank %d %08x", r, h))
		}
	}
	if differ == nil {
		return nil
	}
	return fmt.Errorf("%w: HCOMM_CHECK_RESULTS: the ranks' results differ (CRC32C rank 0 %08x; %s): data was corrupted or the reduction is not deterministic",
		errs.ErrMismatch, all[0], strings.Join(differ, ", "))
}

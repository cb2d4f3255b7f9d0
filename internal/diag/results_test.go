package diag

import (
	"errors"
	"strings"
	"testing"

	"github.com/hcomm-go/hcomm/internal/errs"
)

func TestCompareResults(t *testing.T) {
	h := ResultHash([]byte("result"))
	if h == ResultHash([]byte("resulT")) {
		t.Fatal("the hash does not see a changed byte")
	}
	if err := CompareResults([]uint32{h, h, h}); err != nil {
		t.Errorf("equal hashes: %v", err)
	}
	err := CompareResults([]uint32{h, h, h + 1, h + 2})
	if !errors.Is(err, errs.ErrMismatch) || !strings.Contains(err.Error(), "rank 2 ") || !strings.Contains(err.Error(), "rank 3 ") || strings.Contains(err.Error(), "rank 1 ") {
		t.Errorf("two ranks differ: %v", err)
	}
}

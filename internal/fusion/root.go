package fusion

import (
	"log/slog"

	"github.com/hcomm-go/hcomm/internal/stream"
)

// Root is what the public hcomm/fusion package needs of the root
// package's values beyond their exported API: the machinery inside an
// *hcomm.Event and an *hcomm.Stream, and a communicator's logger and
// observer. The root package sets it when it is initialized. The values
// are typed any because this package cannot import the root; each func
// asserts the root type it is given.
var Root struct {
	Event    func(e any) *stream.Event // *hcomm.Event
	Stream   func(s any) Stream        // *hcomm.Stream
	Log      func(c any) *slog.Logger  // *hcomm.Comm's logger
	Launched func(c any, l Launch)     // tells *hcomm.Comm's Observer
}

package plan

import "github.com/hcomm-go/hcomm/internal/sched"

// Why says, for the per-collective DEBUG line, why a call of collective c
// runs algo: group says it runs as a group call of the transport (small,
// every rank on one host) rather than a schedule.
func (o Overrides) Why(c sched.Coll, algo string, group bool) string {
	why := "cheapest under the cost model"
	if group {
		why = "small, every rank on this host: slots in the shared segment"
	}
	if name, ok := o[c]; ok {
		if name == algo {
			why = "forced (HCOMM_ALGO / Config.Algo)"
		} else {
			why = "the forced " + name + " cannot serve this call; cheapest under the cost model"
		}
	}
	return why
}

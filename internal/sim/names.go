package sim

import "github.com/hcomm-go/hcomm/internal/sched"

// ParseColl returns the collective named name (as hcomm perf names them;
// sched.CollNamed).
func ParseColl(name string) (sched.Coll, bool) { return sched.CollNamed(name) }

// algoAliases are the friendlier names HCOMM_ALGO accepts too.
var algoAliases = map[string]string{"tree": "", "recursive_doubling": "rd", "rabenseifner": "hd",
	"halving_doubling": "hd", "pipeline": "chain"}

// ResolveAlgo maps an alias (tree, pipeline, rabenseifner, …) to the
// algorithm name of coll.
func ResolveAlgo(c sched.Coll, name string) string {
	if name == "tree" {
		if c == sched.AllReduce {
			return "dbtree"
		}
		return "binomial"
	}
	if a, ok := algoAliases[name]; ok && a != "" {
		return a
	}
	return name
}

package topo

// HomeNode returns the NUMA node memory that this rank uses should sit on:
// the node holding every CPU of cpus (the CPUs the rank may run on), or -1
// when the machine has fewer than two nodes (placement changes nothing
// there, so nothing is done) or cpus span nodes (no node is nearer than
// another).
func HomeNode(m Machine, cpus []int) int {
	if len(m.Nodes) < 2 {
		return -1
	}
	return NodeOf(m.Nodes, cpus)
}

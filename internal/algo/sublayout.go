package algo

// Sub returns the layout of a communicator split from one of layout l:
// parents[i] is the parent's rank of the new communicator's rank i. Ranks
// keep the parent's order within a host, and hosts the parent's order.
func (l Layout) Sub(parents []int) Layout {
	sub := map[int]int{}
	for i, r := range parents {
		sub[r] = i
	}
	var out Layout
	for _, rs := range l.Hosts {
		var h []int
		for _, r := range rs {
			if i, ok := sub[r]; ok {
				h = append(h, i)
			}
		}
		if len(h) > 0 {
			out.Hosts = append(out.Hosts, h)
		}
	}
	return out
}

package server

// tally gathers what one batch of replies adds to the server's series, so
// that queries alike (same cells: transport, type, source, rcode, zone,
// sizes) are added once, with their count, when the batch has been sent,
// rather than with a dozen atomic operations each as they are answered.
// The totals are the same; a batch's queries all count the time from the
// batch's arrival to the end of its answering, just before its send
// (bursts of fewer than a batch are thus counted before their replies
// leave, as one query at a time is). It is used by one read loop.
type tally struct {
	groups []tallyGroup // reused from batch to batch
}

type tallyGroup struct {
	key recordKey
	n   uint64
}

// recordKey is the cells one answered query adds to.
type recordKey struct {
	server  serverKey
	coredns corednsKey
}

func (t *tally) add(k recordKey) {
	for i := range t.groups {
		if t.groups[i].key == k {
			t.groups[i].n++
			return
		}
	}
	t.groups = append(t.groups, tallyGroup{key: k, n: 1})
}

// flush adds the batch to m, every query of it having taken seconds.
func (t *tally) flush(m *metrics, seconds float64) {
	for _, g := range t.groups {
		m.add(g.key.server, g.n, seconds)
		m.coredns.add(g.key.coredns, g.n, seconds)
	}
	t.groups = t.groups[:0]
}

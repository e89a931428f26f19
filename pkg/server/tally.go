package server

import (
	"net/netip"
	"time"
)

// tally gathers what one batch of replies adds to the server's series and
// the per-client counts, so
// that queries alike (same cells: transport, type, source, rcode, zone,
// sizes) are added once, with their count, when the batch has been sent,
// rather than with a dozen atomic operations each as they are answered.
// The totals are the same; a batch's queries all count the time from the
// batch's arrival to the end of its answering, just before its send
// (bursts of fewer than a batch are thus counted before their replies
// leave, as one query at a time is). It is used by one read loop.
type tally struct {
	// observe is whether the batch's queries are shown to the Observer:
	// the loop asks Server.observing once a batch, not once a query.
	observe bool
	groups  []tallyGroup  // reused from batch to batch
	clients []clientGroup // the same for the Counter
}

// clientGroup is a batch's queries from one client with one result.
type clientGroup struct {
	client netip.Addr
	res    Result
	n      uint64
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

func (t *tally) count(client netip.Addr, res Result) {
	for i := range t.clients {
		if g := &t.clients[i]; g.client == client && g.res == res {
			g.n++
			return
		}
	}
	t.clients = append(t.clients, clientGroup{client: client, res: res, n: 1})
}

// pending reports whether the batch has queries not yet accounted.
func (t *tally) pending() bool { return len(t.groups) > 0 || len(t.clients) > 0 }

// flush adds the batch to m and c (nil: none), every query of it having
// taken took.
func (t *tally) flush(m *metrics, c Counter, took time.Duration) {
	seconds := took.Seconds()
	for _, g := range t.groups {
		m.add(g.key.server, g.n, seconds)
		m.coredns.add(g.key.coredns, g.n, seconds)
	}
	t.groups = t.groups[:0]
	for _, g := range t.clients {
		c.Count(g.client, g.res, g.n, time.Duration(g.n)*took)
	}
	t.clients = t.clients[:0]
}

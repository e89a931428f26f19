package server

import (
	"net/netip"
	"time"

	"github.com/nodecache/nodecache/pkg/wire"
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

// recordKey is the cells one answered query adds to, packed in two words
// (recordKeyOf) so that building it and comparing it with a batch's
// groups stays in registers: a struct of a dozen fields written one by
// one and then copied whole stalls on the copy (store forwarding), ~20
// ns per answer in perf record of the hit path. The label indexes are
// derived from it once per group, at the flush (metrics.addRecord).
//
// a: bits 0-31 the server and zone index (corednsKey.sz), 32-47 the
// qtype, 48-52 the rcode (clampRcode), 53-55 the source (clampSource),
// 56 the transport, 57 the client's family, 58 DO, 59 the cache's denial.
// b: the query's size, and the reply's above bit 32.
type recordKey struct{ a, b uint64 }

// recordKeyOf is the recordKey of one answered query on edge ep: reqLen is
// the query's size, reply the reply sent.
func (m *metrics) recordKeyOf(ep edge, client netip.Addr, q *wire.Query, res Result, reqLen int, reply []byte) recordKey {
	src := clampSource(res.Source)
	sz := uint64(ep.server)*uint64(len(m.coredns.zones)) + uint64(m.coredns.zoneIndex(q.LowerName()))
	var do uint64
	if q.DO {
		do = 1
	}
	a := sz&0xffffffff | uint64(q.Type)<<32 | uint64(clampRcode(res.Rcode))<<48 | uint64(src)<<53 |
		uint64(ep.proto&1)<<56 | uint64(familyIndex(client))<<57 | do<<58 | uint64(cacheDenial(src, res.Rcode, reply))<<59
	return recordKey{a: a, b: uint64(uint32(reqLen)) | uint64(uint32(len(reply)))<<32}
}

// addRecord accounts n answered queries of key k that each took seconds:
// what metrics.observe and corednsMetrics.observe add for each.
func (m *metrics) addRecord(k recordKey, n uint64, seconds float64) {
	a := k.a
	qtype, rcode, src := uint16(a>>32), uint8(a>>48&31), wire.Source(a>>53&7)
	proto, fam, do, den := uint8(a>>56&1), uint8(a>>57&1), a>>58&1 == 1, uint8(a>>59&1)
	m.add(serverKey{proto: proto, qtype: uint8(metricQtypeIndex(qtype)), rcode: rcode, src: src}, n, seconds)
	m.coredns.add(m.coredns.keyOf(int(uint32(a)), proto, fam, qtype, rcode, src, do, den, uint32(k.b), uint32(k.b>>32)), n, seconds)
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
		m.addRecord(g.key, g.n, seconds)
	}
	t.groups = t.groups[:0]
	for _, g := range t.clients {
		c.Count(g.client, g.res, g.n, time.Duration(g.n)*took)
	}
	t.clients = t.clients[:0]
}

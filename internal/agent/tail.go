package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/pkg/server"
	"github.com/nodecache/nodecache/pkg/wire"
)

// tailBuffer is how many queries a tail subscriber may have waiting; past
// it the subscriber loses lines (counted) rather than slowing the server.
const tailBuffer = 4096

// tailHub hands every answered query to the `nodecache tail` subscribers.
// With none, Observe is one atomic load.
type tailHub struct {
	n atomic.Int32 // subscribers; read without the lock on the hot path

	mu   sync.RWMutex // guards subs
	subs map[*tailSub]struct{}
}

// tailEvent is one answered query, copied out of the read loop's buffers.
type tailEvent struct {
	at       time.Time
	client   netip.Addr
	name     [wire.MaxNameLen]byte // lowercased wire form
	nameLen  uint8
	qtype    uint16
	rcode    int
	source   wire.Source
	took     time.Duration
	upstream netip.AddrPort
}

// tailSub is one subscriber: a bounded queue and the count of what it lost.
type tailSub struct {
	ch      chan tailEvent
	dropped atomic.Uint64
}

var _ server.Observer = (*tailHub)(nil)

func newTailHub() *tailHub { return &tailHub{subs: make(map[*tailSub]struct{})} }

// Idle implements server.IdleObserver: nobody tails.
func (h *tailHub) Idle() bool { return h.n.Load() == 0 }

// Observe implements server.Observer. It never blocks: a full subscriber
// queue loses the event.
func (h *tailHub) Observe(client netip.Addr, q *wire.Query, res server.Result, took time.Duration) {
	if h.n.Load() == 0 {
		return
	}
	ev := tailEvent{at: time.Now(), client: client, qtype: q.Type, rcode: res.Rcode, source: res.Source,
		took: took, upstream: res.Server}
	ev.nameLen = uint8(copy(ev.name[:], q.LowerName()))
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs {
		select {
		case s.ch <- ev:
		default:
			s.dropped.Add(1)
		}
	}
}

func (h *tailHub) subscribe() *tailSub {
	s := &tailSub{ch: make(chan tailEvent, tailBuffer)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	h.n.Add(1)
	return s
}

func (h *tailHub) unsubscribe(s *tailSub) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
	h.n.Add(-1)
}

// tailFilter selects the queries a subscriber wants.
type tailFilter struct {
	pod, namespace, suffix string
	rcode                  int // -1: any
	minLatency             time.Duration
}

func parseTailFilter(r *http.Request) (tailFilter, error) {
	q := r.URL.Query()
	f := tailFilter{pod: q.Get("pod"), namespace: q.Get("namespace"), rcode: -1}
	if s := q.Get("suffix"); s != "" {
		f.suffix = dns.Fqdn(strings.ToLower(s))
	}
	if s := q.Get("rcode"); s != "" {
		rc, ok := dns.StringToRcode[strings.ToUpper(s)]
		if !ok {
			return f, fmt.Errorf("rcode %q: want an rcode name such as NOERROR, NXDOMAIN, SERVFAIL or REFUSED", s)
		}
		f.rcode = rc
	}
	if s := q.Get("min_latency"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return f, fmt.Errorf("min_latency %q: want a duration such as 50ms", s)
		}
		f.minLatency = d
	}
	return f, nil
}

// match reports whether l passes f; pod matches "ns/name" or "name".
func (f *tailFilter) match(l *adminapi.TailLine) bool {
	switch {
	case f.rcode >= 0 && l.Rcode != dns.RcodeToString[f.rcode]:
		return false
	case f.minLatency > 0 && time.Duration(l.Micros)*time.Microsecond < f.minLatency:
		return false
	case f.suffix != "" && !dns.IsSubDomain(f.suffix, l.Name):
		return false
	}
	ns, name, _ := strings.Cut(l.Pod, "/")
	if f.namespace != "" && ns != f.namespace {
		return false
	}
	if f.pod != "" && l.Pod != f.pod && (strings.Contains(f.pod, "/") || name != f.pod) {
		return false
	}
	return true
}

// adminTail streams the node's queries as JSON lines until the client goes.
func (a *Agent) adminTail(w http.ResponseWriter, r *http.Request) {
	f, err := parseTailFilter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	sub := a.tail.subscribe()
	defer a.tail.unsubscribe(sub)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	enc := json.NewEncoder(w)
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-sub.ch:
			l := a.tailLine(&ev, sub.dropped.Load())
			if !f.match(&l) {
				continue
			}
			if err := enc.Encode(l); err != nil {
				return
			}
			if len(sub.ch) == 0 {
				flusher.Flush()
			}
		}
	}
}

func (a *Agent) tailLine(ev *tailEvent, dropped uint64) adminapi.TailLine {
	name, _, err := dns.UnpackDomainName(ev.name[:ev.nameLen], 0)
	if err != nil {
		name = "?"
	}
	typ, ok := dns.TypeToString[ev.qtype]
	if !ok {
		typ = fmt.Sprintf("TYPE%d", ev.qtype)
	}
	rcode, ok := dns.RcodeToString[ev.rcode]
	if !ok {
		rcode = fmt.Sprintf("RCODE%d", ev.rcode)
	}
	l := adminapi.TailLine{Time: ev.at, Client: ev.client.String(), Pod: a.podName(ev.client), Name: name, Type: typ,
		Rcode: rcode, Source: ev.source.String(), Micros: ev.took.Microseconds(), Dropped: dropped}
	if ev.upstream.IsValid() {
		l.Upstream = ev.upstream.String()
	}
	return l
}

// observers fans each answered query out to the agent's observers: the
// per-client counts of `top`, the `tail` subscribers.
type observers []server.Observer

// Idle implements server.IdleObserver: every observer is idle (one
// that cannot be, such as the query log, never is).
func (o observers) Idle() bool {
	for _, x := range o {
		if i, ok := x.(server.IdleObserver); !ok || !i.Idle() {
			return false
		}
	}
	return true
}

// Observe implements server.Observer.
func (o observers) Observe(client netip.Addr, q *wire.Query, res server.Result, took time.Duration) {
	for _, x := range o {
		x.Observe(client, q, res, took)
	}
}

package cache

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// warm resolves n distinct one-A-record names through c.
func warm(tb testing.TB, c *Cache, n int) {
	tb.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		req := new(dns.Msg)
		req.SetQuestion(fmt.Sprintf("name%06d.example.org.", i), dns.TypeA)
		key, err := wire.KeyOf(req)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := c.Resolve(ctx, key, time.Time{}); err != nil {
			tb.Fatal(err)
		}
	}
	if got := c.Stats().Entries; got != n {
		tb.Fatalf("entries: got %d, want %d", got, n)
	}
}

// liveHeap returns the heap in use after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// replyShapes are the replies the memory figures are taken for: one A
// record, and make bench's (bench/run.sh: NSD answers with the record, the
// zone's NS in the authority section and its address as glue, 87 bytes).
var replyShapes = []struct {
	name  string
	reply func(*dns.Msg) (*dns.Msg, error)
}{
	{"oneA", answerA(3600)},
	{"bench", replyWithGlue},
}

// replyWithGlue answers an A query as an authoritative server with glue
// does: the A record, the zone's NS and that server's address.
func replyWithGlue(req *dns.Msg) (*dns.Msg, error) {
	m := replyA(req, 3600)
	m.Authoritative = true
	hdr := func(name string, typ uint16) dns.RR_Header {
		return dns.RR_Header{Name: name, Rrtype: typ, Class: dns.ClassINET, Ttl: 3600}
	}
	m.Ns = []dns.RR{&dns.NS{Hdr: hdr("example.org.", dns.TypeNS), Ns: "ns.example.org."}}
	m.Extra = []dns.RR{&dns.A{Hdr: hdr("ns.example.org.", dns.TypeA), A: net.IPv4(127, 0, 0, 1).To4()}}
	return m, nil
}

// BenchmarkMemoryPerName fills the cache with 100,000 names, for each
// reply shape, and reports the live heap they hold per name, and what the
// cache accounts for them against --cache-size. RSS is larger by the room
// the collector lets the heap grow by (GOGC), as far as the miss path's
// garbage fills it (docs/architecture.md).
func BenchmarkMemoryPerName(b *testing.B) {
	const names = 100_000
	for _, shape := range replyShapes {
		b.Run(shape.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				before := liveHeap()
				c := newTestCache(b, Config{MaxBytes: 1 << 30}, &fakeUpstream{reply: shape.reply}, nil)
				b.StartTimer()
				warm(b, c, names)
				b.StopTimer()
				after := liveHeap()
				b.ReportMetric(float64(after-before)/names, "heapB/name")
				b.ReportMetric(float64(c.Stats().Bytes)/names, "accountedB/name")
				runtime.KeepAlive(c)
				b.StartTimer()
			}
		})
	}
}

// TestAccountingCoversHeap checks, for each reply shape, that the bytes the
// cache charges against its budget are at least the heap its entries hold,
// so that --cache-size bounds memory rather than understating it.
func TestAccountingCoversHeap(t *testing.T) {
	const names = 20_000
	for _, shape := range replyShapes {
		t.Run(shape.name, func(t *testing.T) {
			before := liveHeap()
			c := newTestCache(t, Config{MaxBytes: 1 << 30}, &fakeUpstream{reply: shape.reply}, nil)
			warm(t, c, names)
			held := int64(liveHeap()) - int64(before)
			if accounted := c.Stats().Bytes; accounted < held {
				t.Errorf("accounted bytes: got %d (%d per name), want at least the %d (%d per name) held on the heap",
					accounted, accounted/names, held, held/names)
			}
			runtime.KeepAlive(c)
		})
	}
}

// TestEntrySize pins an entry's head, its fields and its wire.Packed, to
// 40 bytes: the reply follows it in the same allocation, so each byte of
// the head is a byte more for every cached name (one more past a size
// class boundary costs a whole class step for some replies).
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got > 40 {
		t.Errorf("entry size: got %d bytes, want at most 40", got)
	}
	if got, want := unsafe.Sizeof(wire.Packed{}), unsafe.Sizeof(entry{})-uintptr(entryRoom); got != want {
		t.Errorf("wire.Packed size: got %d bytes, want the %d after the entry's fields", got, want)
	}
	if entryRoom%8 != 0 {
		t.Errorf("entry fields: %d bytes, want a multiple of 8 (wire.PackOwned's room)", entryRoom)
	}
}

// TestNewEntryNeedsRoom checks that an entry is only made in front of a
// reply packed with the room for its fields: one packed without would put
// the entry's fields over the bytes of whatever lies before it.
func TestNewEntryNeedsRoom(t *testing.T) {
	qs := newQuestion(t, "example.org.", dns.TypeA)
	reply, _ := answerA(300)(qs.req)
	p, err := wire.Pack(reply)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("newEntry took a reply packed with no room, want a panic")
		}
	}()
	newEntry(&qs.key, p, kindPositive, time.Now(), time.Minute)
}

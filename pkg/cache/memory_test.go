package cache

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/wire"
)

// BenchmarkMemoryPerName fills the cache with 100,000 one-A-record names and
// reports the live heap they hold per name, and what the cache accounts for
// them against --cache-size. RSS is larger by the GC's headroom (GOGC).
func BenchmarkMemoryPerName(b *testing.B) {
	const names = 100_000
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		c := newTestCache(b, Config{MaxBytes: 1 << 30}, &fakeUpstream{reply: answerA(3600)}, nil)
		b.StartTimer()
		ctx := context.Background()
		for i := 0; i < names; i++ {
			req := new(dns.Msg)
			req.SetQuestion(fmt.Sprintf("name%06d.example.org.", i), dns.TypeA)
			key, err := wire.KeyOf(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.Resolve(ctx, key, req); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		st := c.Stats()
		if st.Entries != names {
			b.Fatalf("entries: got %d, want %d", st.Entries, names)
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/names, "heapB/name")
		b.ReportMetric(float64(st.Bytes)/names, "accountedB/name")
		runtime.KeepAlive(c)
		b.StartTimer()
	}
}

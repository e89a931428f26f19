package adminapi

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/kubezone"
)

// wireTypes is every type the admin API encodes, with the JSON keys of its
// top level: scripts read them through `-o json`, so a rename breaks them.
var wireTypes = []struct {
	v    any
	keys []string
}{
	{&Status{}, []string{"version", "uptime", "listeners", "serving", "not_ready", "interface", "zone", "cache",
		"upstreams", "totals", "config", "config_generation", "config_error", "downgrade_refused", "supervisor"}},
	{&Supervisor{}, []string{"restarts", "crash_loop", "last_death", "last_death_at", "journal_bytes", "in_process", "in_process_reason"}},
	{&Reload{}, []string{"generation", "error"}},
	{&Upstream{}, []string{"addr", "up", "consecutive_fails", "last_rtt_ms", "requests", "errors"}},
	{&Query{}, []string{"name", "type", "rcode", "source", "server", "took_us", "answer", "authority", "additional", "flags"}},
	{&Flush{}, []string{"flushed", "name", "zone", "all"}},
	{&Top{}, []string{"clients", "totals", "time"}},
	{&ClientRow{}, []string{"ip", "pod", "queries", "nxdomain", "avg_latency_us"}},
	{&Totals{}, []string{"queries", "nxdomain", "avg_latency_us", "rcodes", "sources"}},
	{&TailLine{}, []string{"time", "client", "pod", "name", "type", "rcode", "source", "took_us", "upstream", "dropped"}},
	{&cache.Stats{}, nil},
	{&cache.EntryInfo{}, nil},
	{&kubezone.Record{}, nil},
	{&kubezone.PodInfo{}, nil},
}

// TestRoundTrip encodes each type with every field set and decodes it back:
// whatever the agent sends, the client reads unchanged.
func TestRoundTrip(t *testing.T) {
	for _, tt := range wireTypes {
		typ := reflect.TypeOf(tt.v).Elem()
		t.Run(typ.String(), func(t *testing.T) {
			in := reflect.New(typ)
			fill(t, in.Elem(), 1)
			b, err := json.Marshal(in.Interface())
			if err != nil {
				t.Fatalf("marshal: %v", err)
			}
			out := reflect.New(typ)
			if err := json.Unmarshal(b, out.Interface()); err != nil {
				t.Fatalf("unmarshal %s: %v", b, err)
			}
			if !reflect.DeepEqual(in.Interface(), out.Interface()) {
				t.Errorf("round trip changed the value:\ngot  %+v\nwant %+v\njson %s", out.Elem(), in.Elem(), b)
			}
			if tt.keys == nil {
				return
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("unmarshal into a map: %v", err)
			}
			var got []string
			for k := range m {
				got = append(got, k)
			}
			sort.Strings(got)
			want := slices.Clone(tt.keys)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("got keys %v, want %v", got, want)
			}
		})
	}
}

// fill sets every field of v, recursively, to a non-zero value derived
// from seed, so that a field the JSON drops shows in the comparison.
func fill(t testing.TB, v reflect.Value, seed int) {
	t.Helper()
	switch v.Type() {
	case reflect.TypeOf(time.Time{}):
		v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 16, 0, seed, 123456789, time.UTC)))
		return
	case reflect.TypeOf(netip.Addr{}):
		v.Set(reflect.ValueOf(netip.AddrFrom4([4]byte{10, 0, 0, byte(seed)})))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+seed%26)))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(seed))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(seed))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(seed) + 0.5)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), seed)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		fill(t, v.Index(0), seed)
		fill(t, v.Index(1), seed+1)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(t, k, seed)
		fill(t, e, seed)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), seed+i)
			}
		}
	default:
		t.Fatalf("fill: no value for %s", v.Type())
	}
}

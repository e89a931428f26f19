package cli

import (
	"reflect"
	"strings"
	"testing"
)

// fakeNames answers found for the names in found, nodata for those in
// nodata, servfail/error likewise, and NXDOMAIN for every other name.
type fakeNames struct {
	found, nodata, servfail, refused []string
}

func (f fakeNames) ask(fqdn string) string {
	for _, l := range []struct {
		names []string
		out   string
	}{{f.found, outcomeFound}, {f.nodata, outcomeNoData}, {f.servfail, outcomeServFail}, {f.refused, outcomeError}} {
		for _, n := range l.names {
			if strings.EqualFold(n, fqdn) {
				return l.out
			}
		}
	}
	return outcomeNXDomain
}

func TestWalk(t *testing.T) {
	pod := podResolverConf("demo", "cluster.local", []string{"corp.example"})
	musl := pod
	musl.Libc = libcMusl
	ndots1 := resolverConf{Search: []string{"a.example", "b.example"}, Ndots: 1, Libc: libcGlibc}
	tests := []struct {
		name     string
		query    string
		conf     resolverConf
		names    fakeNames
		want     []string // names asked, in order
		resolved string
	}{
		{"short service name resolves on the first search domain", "web", pod,
			fakeNames{found: []string{"web.demo.svc.cluster.local."}},
			[]string{"web.demo.svc.cluster.local."}, "web.demo.svc.cluster.local."},
		{"service.namespace resolves on the second", "web.other", pod,
			fakeNames{found: []string{"web.other.svc.cluster.local."}},
			[]string{"web.other.demo.svc.cluster.local.", "web.other.svc.cluster.local."}, "web.other.svc.cluster.local."},
		{"external name below ndots walks the whole list, then as-is", "example.com", pod,
			fakeNames{found: []string{"example.com."}},
			[]string{"example.com.demo.svc.cluster.local.", "example.com.svc.cluster.local.", "example.com.cluster.local.",
				"example.com.corp.example.", "example.com."}, "example.com."},
		{"trailing dot is absolute: one name", "example.com.", pod,
			fakeNames{found: []string{"example.com."}},
			[]string{"example.com."}, "example.com."},
		{"trailing dot, absent: still one name", "nope.example.", pod,
			fakeNames{}, []string{"nope.example."}, ""},
		{"ndots dots or more: as-is first", "a.b.c.d.e.example", pod,
			fakeNames{found: []string{"a.b.c.d.e.example."}},
			[]string{"a.b.c.d.e.example."}, "a.b.c.d.e.example."},
		{"ndots dots, absent: as-is first then the search list, not as-is again", "a.b.c.d.e.example", pod,
			fakeNames{},
			[]string{"a.b.c.d.e.example.", "a.b.c.d.e.example.demo.svc.cluster.local.", "a.b.c.d.e.example.svc.cluster.local.",
				"a.b.c.d.e.example.cluster.local.", "a.b.c.d.e.example.corp.example."}, ""},
		{"nodata and servfail move on in glibc", "x", ndots1,
			fakeNames{nodata: []string{"x.a.example."}, servfail: []string{"x.b.example."}, found: []string{"x."}},
			[]string{"x.a.example.", "x.b.example.", "x."}, "x."},
		{"refused leaves the search list in glibc, as-is still tried", "x", ndots1,
			fakeNames{refused: []string{"x.a.example."}},
			[]string{"x.a.example.", "x."}, ""},
		{"ndots 1 with one dot: as-is first", "svc.example", ndots1,
			fakeNames{found: []string{"svc.example.b.example."}},
			[]string{"svc.example.", "svc.example.a.example.", "svc.example.b.example."}, "svc.example.b.example."},
		{"musl: ndots dots or more means the name alone", "a.b.c.d.e.example", musl,
			fakeNames{}, []string{"a.b.c.d.e.example."}, ""},
		{"musl: nodata stops the search list", "web", musl,
			fakeNames{nodata: []string{"web.demo.svc.cluster.local."}},
			[]string{"web.demo.svc.cluster.local.", "web."}, ""},
		{"musl: nxdomain moves on", "web.other", musl,
			fakeNames{found: []string{"web.other.svc.cluster.local."}},
			[]string{"web.other.demo.svc.cluster.local.", "web.other.svc.cluster.local."}, "web.other.svc.cluster.local."},
		{"root on the search list counts as the as-is try", "x", resolverConf{Search: []string{"a.example", "."}, Ndots: 1, Libc: libcGlibc},
			fakeNames{}, []string{"x.a.example.", "x."}, ""},
		{"no search list", "x", resolverConf{Ndots: 1, Libc: libcGlibc},
			fakeNames{found: []string{"x."}}, []string{"x."}, "x."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			steps, resolved := walk(tt.query, tt.conf, tt.names.ask)
			var got []string
			for _, s := range steps {
				got = append(got, s.Name)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("names asked: got %q, want %q", got, tt.want)
			}
			if resolved != tt.resolved {
				t.Errorf("resolved: got %q, want %q", resolved, tt.resolved)
			}
		})
	}
}

func TestPodResolverConf(t *testing.T) {
	got := podResolverConf("demo", "cluster.local.", []string{"cluster.local", "corp.example"})
	want := resolverConf{Search: []string{"demo.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"}, Ndots: 5, Libc: libcGlibc}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestCombineOutcome(t *testing.T) {
	tests := []struct {
		rcodes  []string
		answers []int
		want    string
	}{
		{[]string{"NOERROR", "NOERROR"}, []int{1, 0}, outcomeFound},
		{[]string{"NOERROR", "NOERROR"}, []int{0, 2}, outcomeFound},
		{[]string{"NOERROR", "NOERROR"}, []int{0, 0}, outcomeNoData},
		{[]string{"NXDOMAIN", "NXDOMAIN"}, []int{0, 0}, outcomeNXDomain},
		{[]string{"SERVFAIL", "NOERROR"}, []int{0, 0}, outcomeServFail},
		{[]string{"NOERROR", "SERVFAIL"}, []int{0, 0}, outcomeServFail},
		{[]string{"REFUSED", "REFUSED"}, []int{0, 0}, outcomeError},
		{[]string{"NXDOMAIN", "SERVFAIL"}, []int{0, 0}, outcomeNXDomain},
	}
	for _, tt := range tests {
		if got := combineOutcome(tt.rcodes, tt.answers); got != tt.want {
			t.Errorf("combineOutcome(%v, %v): got %s, want %s", tt.rcodes, tt.answers, got, tt.want)
		}
	}
}

package resolvconf

import (
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		servers []string
		lines   []int
		search  []string // kubelet's reading
		stub    []string // a stub resolver's
		ndots   int
	}{
		{"empty", "", []string{}, []int{}, nil, nil, 1},
		{"kubelet pod file",
			"search demo.svc.cluster.local svc.cluster.local cluster.local\nnameserver 169.254.20.10\noptions ndots:5\n",
			[]string{"169.254.20.10"}, []int{2},
			[]string{"demo.svc.cluster.local", "svc.cluster.local", "cluster.local"},
			[]string{"demo.svc.cluster.local", "svc.cluster.local", "cluster.local"}, 5},
		{"comments skipped, last search wins, trailing dots dropped, ndots capped",
			"# search no.example\n; nameserver 10.9.9.9\nsearch a.example\nnameserver 10.0.0.1\nsearch b.example. c.example\noptions timeout:1 ndots:40\nnameserver ::1\n",
			[]string{"10.0.0.1", "::1"}, []int{4, 7}, []string{"b.example", "c.example"}, []string{"b.example", "c.example"}, 15},
		{"domain after search: the stub searches it, kubelet does not",
			"search a.example b.example\ndomain corp.example.\nnameserver 10.0.0.1\n",
			[]string{"10.0.0.1"}, []int{3}, []string{"a.example", "b.example"}, []string{"corp.example"}, 1},
		{"search after domain wins for both", "domain corp.example\nsearch a.example\n",
			[]string{}, []int{}, []string{"a.example"}, []string{"a.example"}, 1},
		{"bad ndots ignored, nameserver without address skipped", "options ndots:x ndots:-1\nnameserver\n",
			[]string{}, []int{}, nil, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(strings.NewReader(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			lines := []int{}
			for _, n := range c.Nameservers {
				lines = append(lines, n.Line)
			}
			if got := c.Servers(); !reflect.DeepEqual(got, tt.servers) || !reflect.DeepEqual(lines, tt.lines) {
				t.Errorf("servers %q at lines %v, want %q at %v", got, lines, tt.servers, tt.lines)
			}
			if !reflect.DeepEqual(c.Search, tt.search) {
				t.Errorf("Search %q, want %q", c.Search, tt.search)
			}
			if got := c.StubSearch(); !reflect.DeepEqual(got, tt.stub) {
				t.Errorf("StubSearch %q, want %q", got, tt.stub)
			}
			if c.Ndots != tt.ndots {
				t.Errorf("Ndots %d, want %d", c.Ndots, tt.ndots)
			}
		})
	}
}

func TestParseReadError(t *testing.T) {
	if _, err := Parse(iotest.ErrReader(iotest.ErrTimeout)); err == nil {
		t.Fatal("no error from a failing reader")
	}
}

func TestReadFileMissing(t *testing.T) {
	if _, err := ReadFile(t.TempDir() + "/nope"); err == nil {
		t.Fatal("no error for a missing file")
	}
}

package cli

import (
	"strings"
	"testing"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// TestDoctorCorefileUnsupported: doctor's coredns check learns from
// migrate's translation what nodecache cannot reproduce, by line, in the
// "coredns:LINE directive: reason" form it parses.
func TestDoctorCorefileUnsupported(t *testing.T) {
	cf, err := corefile.Parse("coredns", ".:53 {\n template IN A example.test\n forward . /etc/resolv.conf\n}\n", corefile.Vars{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := corefileUnsupported(cf, "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "coredns:2 template") || !strings.Contains(got[0], "the template plugin") {
		t.Errorf("got %q, want one entry \"coredns:2 template ...: the template plugin ...\"", got)
	}
}

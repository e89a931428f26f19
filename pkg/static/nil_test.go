package static

import (
	"testing"

	"github.com/miekg/dns"
)

// A nil registerer and a nil logger make working records: metrics kept but
// not registered, logs discarded.
func TestNewWithNilRegistererAndLogger(t *testing.T) {
	r, err := New(Config{Entries: []string{"10.0.0.5 db.example.internal"}}, nil, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	m := ask(t, r, "db.example.internal.", dns.TypeA)
	if m == nil || len(m.Answer) != 1 {
		t.Fatalf("answer: got %v, want one A record", m)
	}
}

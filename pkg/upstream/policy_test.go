package upstream

import (
	"strings"
	"testing"
)

func TestParsePolicy(t *testing.T) {
	for _, s := range []string{"", "sequential", "random", "round_robin"} {
		if p, err := ParsePolicy(s); err != nil || string(p) != s {
			t.Errorf("ParsePolicy(%q): got %q, %v; want %q, nil", s, p, err, s)
		}
	}
	_, err := ParsePolicy("fastest")
	if err == nil || !strings.Contains(err.Error(), `unknown policy "fastest" (want sequential, random or round_robin)`) {
		t.Errorf("ParsePolicy(fastest): got %v, want an error naming the valid policies", err)
	}
}

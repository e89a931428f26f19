package kubezone

import (
	"strings"
	"testing"
)

func TestParsePodsMode(t *testing.T) {
	for _, s := range []string{"", "insecure", "verified", "disabled"} {
		if m, err := ParsePodsMode(s); err != nil || string(m) != s {
			t.Errorf("ParsePodsMode(%q): got %q, %v; want %q, nil", s, m, err, s)
		}
	}
	_, err := ParsePodsMode("sometimes")
	if err == nil || !strings.Contains(err.Error(), `pods mode "sometimes": want insecure, verified or disabled`) {
		t.Errorf("ParsePodsMode(sometimes): got %v, want an error naming the valid modes", err)
	}
}

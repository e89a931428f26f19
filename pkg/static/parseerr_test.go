package static

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestParseErrorsShowNoContent points a hosts file at text that is not a
// hosts file (a secret, say): the error names the file, the line and the
// field, and never what the line holds.
func TestParseErrorsShowNoContent(t *testing.T) {
	const secret = "s3cr3t"
	for _, tt := range []struct {
		name, text, want string
	}{
		{"one field", "10.0.0.1 ok.example\nroot:" + secret + ":19000:0:99999:7:::\n", "line 2: want IP NAME [NAME...]"},
		{"not an IP", secret + " host.example\n", "line 1 field 1: not an IP address"},
		{"not a name", "# comment\n10.0.0.1 ok.example " + secret + "..x\n", "line 2 field 3: not a domain name"},
		{"name too long", "10.0.0.1 " + strings.Repeat(secret+"abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz.", 5) + "\n", "line 1 field 2: not a domain name"},
		{"line too long", "10.0.0.1 ok.example\n" + strings.Repeat(secret, 20000) + "\n", "line 2: longer than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hosts")
			if err := os.WriteFile(path, []byte(tt.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := New(Config{Files: []string{path}}, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("got no error")
			}
			msg := err.Error()
			if strings.Contains(msg, secret) || !strings.Contains(msg, path) || !strings.Contains(msg, tt.want) {
				t.Errorf("got %q, want %s and %q, without the file's content", msg, path, tt.want)
			}
		})
	}
}

package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/nodecache/nodecache/internal/adminapi"
)

// sourceText says where an answer came from: "zone", "cache hit",
// "upstream 10.0.0.2:53".
func sourceText(qr adminapi.Query) string {
	switch qr.Source {
	case "cache":
		return "cache hit"
	case "stale":
		return "stale cache entry (upstreams failing)"
	case "upstream":
		if qr.Server != "" {
			return "upstream " + qr.Server
		}
	}
	return qr.Source
}

// cmdQuery is `nodecache query NAME [TYPE]`.
func cmdQuery(ctx context.Context, out io.Writer, args []string) error {
	var o cliOpts
	fs := newCLIFlags("query", &o)
	pos, err := parseCLI(fs, &o, args, 1, 2)
	if err != nil {
		return err
	}
	typ := "A"
	if len(pos) == 2 {
		typ = strings.ToUpper(pos[1])
	}
	qr, err := adminapi.NewClient(o.socket).Query(ctx, pos[0], typ)
	if err != nil {
		return err
	}
	return emit(out, &o, qr, func(w io.Writer) {
		fmt.Fprintf(w, "%s %s: %s from %s in %s (flags: %s)\n", qr.Name, qr.Type, qr.Rcode, sourceText(qr),
			fmtMicros(float64(qr.Micros)), qr.Flags)
		for _, sec := range []struct {
			name string
			rrs  []string
		}{{"answer", qr.Answer}, {"authority", qr.Ns}, {"additional", qr.Extra}} {
			if len(sec.rrs) == 0 {
				continue
			}
			fmt.Fprintf(w, ";; %s\n", sec.name)
			for _, rr := range sec.rrs {
				fmt.Fprintln(w, rr)
			}
		}
	})
}

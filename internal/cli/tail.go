package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/internal/adminapi"
)

// cmdTail is `nodecache tail [--pod P] [--namespace NS] [--suffix S]
// [--rcode R] [--min-latency D]`: the node's queries as they are answered,
// until Ctrl-C.
func cmdTail(ctx context.Context, out io.Writer, args []string) error {
	var o cliOpts
	var pod, ns, suffix, rcode string
	var minLatency time.Duration
	fs := newCLIFlags("tail", &o)
	fs.StringVar(&pod, "pod", "", "only queries of this pod (NAME or NAMESPACE/NAME)")
	fs.StringVar(&ns, "namespace", "", "only queries of pods in this namespace")
	fs.StringVar(&suffix, "suffix", "", "only names at or below this suffix")
	fs.StringVar(&rcode, "rcode", "", "only answers with this rcode (NOERROR, NXDOMAIN, SERVFAIL, ...)")
	fs.DurationVar(&minLatency, "min-latency", 0, "only answers that took at least this long (e.g. 50ms)")
	if _, err := parseCLI(fs, &o, args, 0, 0); err != nil {
		return err
	}
	if minLatency < 0 {
		return usageErrorf("tail: --min-latency %v: want a duration of 0 or more", minLatency)
	}
	if _, ok := dns.StringToRcode[strings.ToUpper(rcode)]; rcode != "" && !ok {
		return usageErrorf("tail: --rcode %q: want NOERROR, NXDOMAIN, SERVFAIL, REFUSED, ...", rcode)
	}
	if _, ok := dns.IsDomainName(suffix); suffix != "" && !ok {
		return usageErrorf("tail: --suffix %q: want a domain name", suffix)
	}
	f := adminapi.TailFilter{Pod: pod, Namespace: ns, Suffix: suffix, Rcode: rcode, MinLatency: minLatency}
	var lost uint64
	err := adminapi.NewClient(o.socket).Tail(ctx, f, func(l adminapi.TailLine) error {
		if l.Dropped > lost {
			fmt.Fprintf(out, "# %d queries lost: this reader was too slow\n", l.Dropped-lost)
			lost = l.Dropped
		}
		if o.output != "text" {
			return writeStructured(out, &o, l)
		}
		who := l.Pod
		if who == "" {
			who = l.Client
		}
		up := ""
		if l.Upstream != "" {
			up = " via " + l.Upstream
		}
		_, err := fmt.Fprintf(out, "%s %s %s %s %s %s %s%s\n", l.Time.Format("15:04:05.000"), who, l.Name, l.Type,
			l.Rcode, l.Source, fmtMicros(float64(l.Micros)), up)
		return err
	})
	if errors.Is(err, context.Canceled) {
		return nil // Ctrl-C ends a tail; that is no failure
	}
	return err
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/miekg/dns"
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
	q := url.Values{}
	for k, v := range map[string]string{"pod": pod, "namespace": ns, "suffix": suffix, "rcode": rcode} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if minLatency > 0 {
		q.Set("min_latency", minLatency.String())
	}
	c := newAdminClient(o.socket)
	var lost uint64
	err := c.stream(ctx, "/v1/tail", q, func(line []byte) error {
		var l tailLine
		if err := json.Unmarshal(line, &l); err != nil {
			return fmt.Errorf("decoding the agent's tail line: %w", err)
		}
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

// stream calls fn with each line of the answer to GET path?q until the
// answer ends or ctx does. Unlike get it has no overall timeout.
func (c *adminClient) stream(ctx context.Context, path string, q url.Values, fn func(line []byte) error) error {
	u := url.URL{Scheme: "http", Host: "nodecache", Path: path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("building request %s: %w", path, err)
	}
	hc := &http.Client{Transport: c.hc.Transport} // no Timeout: a stream lasts
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if isDialError(err) {
			return &agentError{socket: c.socket, cause: err}
		}
		return fmt.Errorf("calling the agent (GET %s): %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("the agent answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the agent's stream: %w", err)
	}
	return nil
}

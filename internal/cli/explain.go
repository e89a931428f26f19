package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/nodecache/nodecache/internal/adminapi"
	"github.com/nodecache/nodecache/pkg/kubezone"
	"github.com/nodecache/nodecache/pkg/resolvconf"
)

// explainReport is the result of `nodecache explain`.
type explainReport struct {
	Name     string        `json:"name"`
	Conf     resolverConf  `json:"resolver"`
	Steps    []explainStep `json:"steps"`
	Resolved string        `json:"resolved"` // "" when no name resolved
	Queries  int           `json:"queries"`
	Micros   int64         `json:"took_us"` // per step the slowest type (they go in parallel), summed
}

// explainStep is one name of the walk and the agent's reply for each type.
type explainStep struct {
	walkStep
	Replies []adminapi.Query `json:"replies"`
}

type explainOpts struct {
	cliOpts
	pod, resolvConf, hostResolvConf, domain, libc, types string
	ndots                                                int
}

// cmdExplain is `nodecache explain NAME (--pod NS/NAME | --resolv-conf FILE)`.
func cmdExplain(ctx context.Context, out io.Writer, args []string) error {
	var o explainOpts
	fs := newCLIFlags("explain", &o.cliOpts)
	fs.StringVar(&o.pod, "pod", "", "NS/NAME: a ClusterFirst pod of namespace NS (kubelet's search list, ndots 5)")
	fs.StringVar(&o.resolvConf, "resolv-conf", "", "take search and ndots from this resolv.conf instead")
	fs.StringVar(&o.hostResolvConf, "host-resolv-conf", "/etc/resolv.conf", "the node's resolv.conf, whose search list kubelet appends for --pod")
	fs.StringVar(&o.domain, "cluster-domain", "", "cluster domain for --pod (default: the agent's)")
	fs.StringVar(&o.libc, "libc", libcGlibc, "stub resolver to mirror: glibc or musl (Alpine)")
	fs.StringVar(&o.types, "types", "A,AAAA", "query types sent for each name (getaddrinfo sends A and AAAA)")
	fs.IntVar(&o.ndots, "ndots", -1, "override ndots")
	pos, err := parseCLI(fs, &o.cliOpts, args, 1, 1)
	if err != nil {
		return err
	}
	c := adminapi.NewClient(o.socket)
	conf, err := explainConf(ctx, c, &o)
	if err != nil {
		return err
	}
	rep, err := explain(ctx, c, pos[0], conf, strings.Split(strings.ToUpper(o.types), ","))
	if err != nil {
		return err
	}
	return emit(out, &o.cliOpts, rep, func(w io.Writer) { printExplain(w, rep) })
}

// explainConf builds the resolver configuration the flags describe.
func explainConf(ctx context.Context, c *adminapi.Client, o *explainOpts) (resolverConf, error) {
	var conf resolverConf
	switch {
	case (o.pod == "") == (o.resolvConf == ""):
		return conf, usageErrorf("explain: give exactly one of --pod NS/NAME and --resolv-conf FILE")
	case o.resolvConf != "":
		rc, err := resolvconf.ReadFile(o.resolvConf)
		if err != nil {
			return conf, fmt.Errorf("explain: reading --resolv-conf: %w", err)
		}
		conf = resolverConf{Search: rc.StubSearch(), Ndots: rc.Ndots}
	default:
		ns, name, ok := strings.Cut(o.pod, "/")
		if !ok || ns == "" || name == "" {
			return conf, usageErrorf("explain: --pod %q: want NAMESPACE/NAME", o.pod)
		}
		pod, err := c.PodByName(ctx, ns, name)
		if err != nil {
			return conf, fmt.Errorf("explain: --pod %s: %w", o.pod, err)
		}
		host := resolvconf.Conf{Ndots: 1}
		if rc, err := resolvconf.ReadFile(o.hostResolvConf); err == nil {
			host = rc
		} else if !errors.Is(err, os.ErrNotExist) {
			return conf, fmt.Errorf("explain: reading --host-resolv-conf: %w", err)
		}
		if conf, err = podConf(ctx, c, o, pod, host); err != nil {
			return conf, err
		}
	}
	if o.ndots >= 0 {
		conf.Ndots = min(o.ndots, resolvconf.MaxNdots)
	}
	if o.libc != libcGlibc && o.libc != libcMusl {
		return conf, usageErrorf("explain: --libc %q: want glibc or musl", o.libc)
	}
	conf.Libc = o.libc
	return conf, nil
}

// podConf is the resolver configuration kubelet gives pod: the node's own
// (host) for dnsPolicy Default and host-network ClusterFirst pods, the
// cluster's search path for the others; a pod with its own dnsConfig or
// dnsPolicy None has one the agent does not know.
func podConf(ctx context.Context, c *adminapi.Client, o *explainOpts, pod kubezone.PodInfo, host resolvconf.Conf) (resolverConf, error) {
	switch {
	case pod.DefaultDNS():
		search := resolvconf.PodSearch("", host.Search, resolvconf.Pod{Namespace: pod.Namespace, DNSPolicy: pod.DNSPolicy, HostNetwork: pod.HostNetwork})
		return resolverConf{Search: search, Ndots: host.Ndots}, nil
	case pod.DNSPolicy == "None" || pod.CustomDNS:
		return resolverConf{}, fmt.Errorf("explain: pod %s/%s sets its own DNS config (dnsPolicy %s): give its resolv.conf with --resolv-conf (kubectl exec %s -n %s -- cat /etc/resolv.conf)",
			pod.Namespace, pod.Name, pod.DNSPolicy, pod.Name, pod.Namespace)
	}
	domain := o.domain
	if domain == "" {
		st, err := c.Status(ctx)
		if err != nil {
			return resolverConf{}, err
		}
		domain = st.Config["cluster-domain"]
	}
	return podResolverConf(pod.Namespace, domain, host.Search), nil
}

// explain walks the search path of name under conf, asking the agent.
func explain(ctx context.Context, c *adminapi.Client, name string, conf resolverConf, types []string) (explainReport, error) {
	rep := explainReport{Name: name, Conf: conf, Steps: []explainStep{}}
	var fatal error
	steps, resolved := walk(name, conf, func(fqdn string) string {
		if fatal != nil {
			return outcomeError
		}
		st := explainStep{walkStep: walkStep{Name: fqdn}}
		var rcodes []string
		var answers []int
		var slowest int64
		for _, typ := range types {
			qr, err := c.Query(ctx, fqdn, typ)
			if err != nil {
				if errors.Is(err, adminapi.ErrAgentUnreachable) || ctx.Err() != nil {
					fatal = err
					return outcomeError
				}
				qr = adminapi.Query{Name: fqdn, Type: typ, Rcode: "ERROR: " + err.Error()}
			}
			rep.Queries++
			slowest = max(slowest, qr.Micros)
			st.Replies = append(st.Replies, qr)
			rcodes = append(rcodes, qr.Rcode)
			answers = append(answers, len(qr.Answer))
		}
		rep.Micros += slowest
		rep.Steps = append(rep.Steps, st)
		return combineOutcome(rcodes, answers)
	})
	if fatal != nil {
		return rep, fatal
	}
	for i := range steps {
		rep.Steps[i].Outcome = steps[i].Outcome
	}
	rep.Resolved = resolved
	return rep, nil
}

func printExplain(w io.Writer, rep explainReport) {
	fmt.Fprintf(w, "explain %s (%s)\n", rep.Name, describeConf(rep.Conf))
	fmt.Fprintln(w, "#\tNAME\tTYPE\tRCODE\tANSWERS\tSOURCE\tTIME\tOUTCOME")
	for i, st := range rep.Steps {
		for j, qr := range st.Replies {
			outcome := ""
			if j == len(st.Replies)-1 {
				outcome = st.Outcome
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", i+1, st.Name, qr.Type, qr.Rcode, len(qr.Answer),
				sourceText(qr), fmtMicros(float64(qr.Micros)), outcome)
		}
	}
	names := len(rep.Steps)
	if rep.Resolved == "" {
		fmt.Fprintf(w, "NOT resolved after %d queries for %d names, %s in the agent\n", rep.Queries, names, fmtMicros(float64(rep.Micros)))
		return
	}
	fmt.Fprintf(w, "resolved as %s after %d queries for %d names, %s in the agent\n", rep.Resolved, rep.Queries, names, fmtMicros(float64(rep.Micros)))
	if names > 1 {
		fmt.Fprintf(w, "tip: ask for %q (trailing dot) to send %d queries instead of %d\n",
			rep.Resolved, len(rep.Steps[names-1].Replies), rep.Queries)
	}
}

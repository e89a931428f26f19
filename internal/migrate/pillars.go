package migrate

import (
	"fmt"
	"unicode"

	"github.com/nodecache/nodecache/pkg/corefile"
)

// clusterDNSPillar is node-local-dns's name for the cluster DNS service,
// which its node-cache binary fills in at run time. nodecache answers the
// cluster zone itself, from the API server.
const clusterDNSPillar = "__PILLAR__CLUSTER__DNS__"

// UpstreamPillar is node-local-dns's name for the node's resolvers, filled
// in at run time from /etc/resolv.conf.
const UpstreamPillar = "__PILLAR__UPSTREAM__SERVERS__"

// checkWords refuses, in every word of cf, node-local-dns variables left
// without a value (but the two node-cache fills in at run time), and
// control characters: a quoted word may hold a line break, which would
// start a key of its own in the config written.
func checkWords(cf *corefile.Corefile) error {
	check := func(file string, line int, words []string) error {
		for _, w := range words {
			for _, r := range w {
				if unicode.IsControl(r) {
					return fmt.Errorf("%s:%d: a word holds a control character (%U): the config written cannot carry it", file, line, r)
				}
			}
			for _, p := range corefile.Pillars(w) {
				if p != clusterDNSPillar && p != UpstreamPillar {
					return fmt.Errorf("%s:%d: %s has no value: give it with --var %s=VALUE (the node-local-dns manifest is filled in when it is installed)",
						file, line, p, p)
				}
			}
		}
		return nil
	}
	var walk func(ds []*corefile.Directive) error
	walk = func(ds []*corefile.Directive) error {
		for _, d := range ds {
			if err := check(d.File, d.Line, append([]string{d.Name}, d.Args...)); err != nil {
				return err
			}
			if err := walk(d.Options); err != nil {
				return err
			}
		}
		return nil
	}
	for _, b := range cf.Blocks {
		if err := check(b.File, b.Line, b.Keys); err != nil {
			return err
		}
		if err := walk(b.Directives); err != nil {
			return err
		}
	}
	return nil
}

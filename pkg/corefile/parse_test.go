package corefile

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// flat renders a parsed Corefile compactly: one line per directive and
// option, options indented.
func flat(cf *Corefile) string {
	var b strings.Builder
	var walk func(ds []*Directive, depth int)
	walk = func(ds []*Directive, depth int) {
		for _, d := range ds {
			b.WriteString(strings.Repeat("  ", depth) + d.String() + "\n")
			walk(d.Options, depth+1)
		}
	}
	for _, bl := range cf.Blocks {
		b.WriteString("[" + strings.Join(bl.Keys, "|") + "]\n")
		walk(bl.Directives, 1)
	}
	return b.String()
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, src string
		vars      Vars
		want      string
	}{
		{"kubeadm shape", `.:53 {
    errors
    health {
       lameduck 5s
    }
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30
}`, nil, "[.:53]\n  errors\n  health\n    lameduck 5s\n  forward . /etc/resolv.conf\n    max_concurrent 1000\n  cache 30\n"},
		{"several blocks and keys", "a.example b.example:53, c.example {\n  forward . 10.0.0.1\n}\n. { cache }\n",
			nil, "[a.example|b.example:53|c.example]\n  forward . 10.0.0.1\n[.]\n  cache\n"},
		{"comments and quotes", "# head\n. { # trailing\n  hosts {\n    \"10.0.0.1 a # not a comment\"\n    10.0.0.2 b#c\n  }\n}",
			nil, "[.]\n  hosts\n    10.0.0.1 a # not a comment\n    10.0.0.2 b#c\n"},
		{"no braces", ".:53\nerrors\nforward . 1.1.1.1\n", nil, "[.:53]\n  errors\n  forward . 1.1.1.1\n"},
		{"env", ". {\n forward . {$UP} {%UP2%}\n}", Vars{"UP": "10.0.0.1", "UP2": "10.0.0.2"},
			"[.]\n  forward . 10.0.0.1 10.0.0.2\n"},
		{"pillars, several words", "__PILLAR__DNS__DOMAIN__:53 {\n forward . __PILLAR__UPSTREAM__SERVERS__\n}",
			Vars{"__PILLAR__DNS__DOMAIN__": "cluster.local", "__PILLAR__UPSTREAM__SERVERS__": "1.1.1.1 8.8.8.8"},
			"[cluster.local:53]\n  forward . 1.1.1.1 8.8.8.8\n"},
		{"pillar without value stays", ". {\n forward . __PILLAR__CLUSTER__DNS__ {\n force_tcp\n }\n}", nil,
			"[.]\n  forward . __PILLAR__CLUSTER__DNS__\n    force_tcp\n"},
		{"close on a directive's line", ". {\n health :8080 }\n", nil, "[.]\n  health :8080\n"},
		{"empty option block", ". {\n reload {\n }\n}", nil, "[.]\n  reload\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cf, err := Parse("Corefile", tt.src, tt.vars)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := flat(cf); got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestParseLinesAndOptions(t *testing.T) {
	cf, err := Parse("Corefile", "\n\n.:53 {\n  forward . 1.1.1.1 {\n    policy sequential\n  }\n}\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	d := cf.Blocks[0].Directives[0]
	if cf.Blocks[0].Line != 3 || d.Line != 4 || d.Options[0].Line != 5 {
		t.Errorf("got lines block %d directive %d option %d, want 3 4 5", cf.Blocks[0].Line, d.Line, d.Options[0].Line)
	}
	if o := d.Option("policy"); o == nil || !reflect.DeepEqual(o.Args, []string{"sequential"}) {
		t.Errorf("got option %+v, want policy sequential", o)
	}
	if d.Option("force_tcp") != nil {
		t.Error("got an option force_tcp that is not there")
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"unclosed block", ".:53 {\n errors\n", "Corefile:1: block opened here is never closed"},
		{"unclosed quote", ". {\n hosts \"a\n}", "Corefile:2: unterminated quoted string"},
		{"stray close", ". {\n}\n}", "Corefile:3: unexpected \"}\" where a server block's zones should be"},
		{"second block without braces", ". {\n}\nexample.org\nerrors\n", "Corefile:3: server block example.org has no { }"},
		{"empty", "# nothing\n", "Corefile:1: no server blocks"},
		{"missing env", ". {\n forward . {$NOPE}\n}", "Corefile:2: environment variable NOPE has no value (give it with --var NOPE=VALUE)"},
		{"brace alone", ". {\n {\n}", "Corefile:2: unexpected { (a block must follow a directive on its line)"},
		{"control character", ". {\n forward . 1.1.1.1\x00\n}", "Corefile:2: control character U+0000"},
		{"no zone", ",  {\n}\n", "Corefile:1: a server block without a zone"},
		{"not UTF-8", ". {\n\n hosts \xff\n}", "Corefile:3: the text is not UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("Corefile", tt.src, nil)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("got %v, want a *SyntaxError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("got %q, want %q", err.Error(), tt.want)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add(".:53 {\n errors\n forward . 1.1.1.1 {\n  force_tcp\n }\n}\n")
	f.Add("a b, c {\n hosts {\n \"x y\" # c\n }\n}")
	f.Fuzz(func(t *testing.T, src string) {
		cf, err := Parse("f", src, nil)
		if err == nil && len(cf.Blocks) == 0 {
			t.Fatal("no error and no blocks")
		}
	})
}

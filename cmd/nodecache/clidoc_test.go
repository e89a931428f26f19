package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/internal/agent"
	"github.com/nodecache/nodecache/internal/cli"
)

// cliDocRow is one row of docs/cli.md's command table.
type cliDocRow struct {
	synopsis string // the first cell: the command's forms, in code spans
	talksTo  string // the second cell
}

// cliDocRows reads docs/cli.md's "## Commands" table, keyed by command name
// (the first word of the first cell).
func cliDocRows(t *testing.T) map[string]cliDocRow {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Commands\n")
	if !ok {
		t.Fatal(`docs/cli.md has no "## Commands" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z-]+)(.*?)` \\| ([^|]+) \\|")
	rows := map[string]cliDocRow{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		if _, dup := rows[m[1]]; dup {
			t.Errorf("docs/cli.md lists %s twice", m[1])
		}
		synopsis := strings.ReplaceAll("`"+m[1]+m[2]+"`", `\|`, "|")
		rows[m[1]] = cliDocRow{synopsis: synopsis, talksTo: strings.TrimSpace(m[3])}
	}
	return rows
}

// helpFlags are the flag names a command's -h text lists.
func helpFlags(help string) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`).FindAllStringSubmatch(help, -1) {
		out[m[1]] = true
	}
	return out
}

// TestCLIDoc holds docs/cli.md's command table to the code: a row for
// every command (and none for a command that does not exist), every flag a
// row names is one the command takes, a command said to talk to the admin
// API takes --admin-socket and one said to talk to nothing does not, and
// each command marked "admin API" alone fails with exit status 3 when no
// agent listens on the socket it is given.
func TestCLIDoc(t *testing.T) {
	rows := cliDocRows(t)
	cmds := docCommands(t)
	cmds["version"] = nil
	for name := range cmds {
		if _, ok := rows[name]; !ok {
			t.Errorf("docs/cli.md's command table has no row for %s", name)
		}
	}
	runFlags := map[string]bool{}
	agent.NewFlagSet(&agent.Config{}).VisitAll(func(f *flag.Flag) { runFlags[f.Name] = true })
	flagRef := regexp.MustCompile(`(?:^|[\s\[(|])--?([a-z][a-z0-9-]*)`)
	for name, row := range rows {
		args, ok := cmds[name]
		if !ok {
			t.Errorf("docs/cli.md lists %s, which is no command", name)
			continue
		}
		flags := map[string]bool{}
		if args != nil {
			flags = helpFlags(commandHelp(t, args...))
		}
		switch name {
		case "cleanup", "check-config": // run's flags, and cleanup's own --force
			for f := range runFlags {
				flags[f] = true
			}
			flags["force"] = name == "cleanup"
		}
		var spans strings.Builder
		for _, m := range regexp.MustCompile("`([^`]*)`").FindAllStringSubmatch(row.synopsis, -1) {
			spans.WriteString(" " + m[1])
		}
		for _, m := range flagRef.FindAllStringSubmatch(spans.String(), -1) {
			if !flags[m[1]] {
				t.Errorf("docs/cli.md: %s has no flag -%s (the row says %q)", name, m[1], row.synopsis)
			}
		}
		admin := strings.HasPrefix(row.talksTo, "admin API")
		if name != "cleanup" && name != "check-config" && admin != flags["admin-socket"] {
			t.Errorf("docs/cli.md: %s talks to %q, but taking --admin-socket is %v", name, row.talksTo, flags["admin-socket"])
		}
	}

	// The commands that only ask the agent, with arguments they accept.
	sample := map[string][]string{
		"status": nil, "upstreams": nil, "reload": nil, "tail": nil,
		"query": {"example.org"}, "cache": {"stats"}, "zone": {"list"}, "top": {"--once"},
		"explain": {"example.org", "--resolv-conf", "/dev/null"},
	}
	sock := filepath.Join(t.TempDir(), "admin.sock")
	for name, row := range rows {
		if row.talksTo != "admin API" {
			continue
		}
		args, ok := sample[name]
		if !ok {
			t.Errorf("%s is marked admin API: give TestCLIDoc arguments to run it with", name)
			continue
		}
		err := cli.Main(append(append([]string{name}, args...), "--admin-socket", sock), "dev")
		if got := cli.ExitCode(err); got != 3 {
			t.Errorf("nodecache %s with no agent: exit status %d (%v), want 3 (agent unreachable)", name, got, err)
		}
	}
}

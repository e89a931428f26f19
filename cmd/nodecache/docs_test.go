package main

import (
	"flag"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/nodecache/nodecache/internal/agent"
	"github.com/nodecache/nodecache/internal/cli"
	"github.com/nodecache/nodecache/internal/gendocs"
)

// The reference page docs/flags.md is generated from the flag sets that -h
// prints; TestFlagsDoc fails when the committed page drifts. `make docs`
// runs it (and internal/agent's TestMetricsDoc) with -update-docs.

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/flags.md from the code")

// helpEnv holds the arguments (space-separated) the helper process hands
// to dispatch.
const helpEnv = "NODECACHE_DOCS_HELP"

// TestMain doubles as the helper process of TestFlagsDoc: commands print
// their -h text to the process's stderr, so each runs in a process of its
// own, the test binary re-run with helpEnv set.
func TestMain(m *testing.M) {
	if args := os.Getenv(helpEnv); args != "" {
		_ = dispatch(strings.Fields(args)) // flag.ErrHelp
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// commandHelp returns what `nodecache ARGS` prints on stderr.
func commandHelp(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helpEnv+"="+strings.Join(args, " "))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("nodecache %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stderr.String()
}

// docCommands are the commands whose flags flags.md lists after run's, with
// the arguments that make each print them: the CLI table's, and those main
// dispatches itself.
func docCommands(t testing.TB) map[string][]string {
	t.Helper()
	cmds := map[string][]string{"probe": {"probe", "live", "-h"}, "migrate": {"migrate", "-h"}, "cleanup": {"cleanup", "-h"}, "check-config": {"check-config", "-h"}}
	for _, name := range cli.Commands() {
		cmds[name] = []string{name, "-h"}
	}
	// Every command of the usage text is documented, bar run (its own
	// table) and version (no flags).
	for _, line := range strings.Split(cli.Usage, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "nodecache" || f[1] == "run" || f[1] == "version" {
			continue
		}
		if _, ok := cmds[f[1]]; !ok {
			t.Errorf("usage lists `nodecache %s`, which docCommands lacks: add it", f[1])
		}
	}
	return cmds
}

// flagEnv clears the environment variables that flag defaults are read
// from (usage strings say "(default $NAME)"), so the page does not depend
// on the machine that generates it.
func flagEnv(t *testing.T) {
	re := regexp.MustCompile(`\(default \$([A-Z_]+)\)`)
	agent.NewFlagSet(&agent.Config{}).VisitAll(func(f *flag.Flag) {
		for _, m := range re.FindAllStringSubmatch(f.Usage, -1) {
			t.Setenv(m[1], "")
		}
	})
}

func TestFlagsDoc(t *testing.T) {
	flagEnv(t)
	var b strings.Builder
	b.WriteString(gendocs.Header)
	b.WriteString(`# Flags

Every flag of ` + "`nodecache run`" + ` and of the CLI commands, read from the flag sets that ` + "`-h`" + ` prints.
Durations take units (` + "`500ms`, `10s`, `1h`" + `); sizes take ` + "`KiB`, `MiB`, `GiB`" + `.
A bad value stops the agent at start with one line that names the flag and says what to fix.
Every setting of ` + "`run`" + ` can also come from a YAML file (` + "`--config`" + `), whose keys are the
flag names; a flag on the command line wins over the file. See [operating.md](operating.md#configuration).

## nodecache run

`)
	b.WriteString(gendocs.FlagTable(agent.NewFlagSet(&agent.Config{})))
	b.WriteString("\n## CLI commands\n\nSee [cli.md](cli.md) for what each command shows.\n")
	cmds := docCommands(t)
	names := make([]string, 0, len(cmds))
	for name := range cmds {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		b.WriteString("\n### nodecache " + name + "\n\n```\n" + commandHelp(t, cmds[name]...) + "```\n")
	}
	gendocs.Golden(t, "../../docs/flags.md", []byte(b.String()), *updateDocs)
}

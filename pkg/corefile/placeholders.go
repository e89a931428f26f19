package corefile

import (
	"fmt"
	"regexp"
	"strings"
)

// Vars are the values of placeholders: {$NAME}, {%NAME%} and %{NAME}%
// look up NAME, __PILLAR__NAME__ looks up the whole word.
type Vars map[string]string

// pillarRE matches a node-local-dns manifest variable.
var pillarRE = regexp.MustCompile(`__PILLAR__[A-Z0-9_]*[A-Z0-9]__`)

// envRE matches {$NAME} and {%NAME%}.
var envRE = regexp.MustCompile(`\{\$([A-Za-z0-9_]+)\}|\{%([A-Za-z0-9_]+)%\}`)

// installRE matches k3s's %{NAME}%, which k3s fills when it writes the
// manifest.
var installRE = regexp.MustCompile(`%\{([A-Za-z0-9_]+)\}%`)

// Pillars returns the __PILLAR__ variables left in s.
func Pillars(s string) []string { return pillarRE.FindAllString(s, -1) }

// fillText replaces the placeholders that a manifest's installer fills
// as text, before CoreDNS reads it: __PILLAR__ variables (a value may
// hold several words; one without a value stays, for the caller) and
// %{NAME}% (one without a value is an error naming it).
func fillText(file, src string, vars Vars) (string, error) {
	for _, m := range installRE.FindAllStringSubmatchIndex(src, -1) {
		if name := src[m[2]:m[3]]; vars[name] == "" {
			if _, ok := vars[name]; !ok {
				return "", &SyntaxError{File: file, Line: 1 + strings.Count(src[:m[0]], "\n"),
					Msg: fmt.Sprintf("%%{%s}%% is filled when the manifest is installed: give its value with --var %s=VALUE", name, name)}
			}
		}
	}
	src = installRE.ReplaceAllStringFunc(src, func(m string) string { return vars[m[2:len(m)-2]] })
	return pillarRE.ReplaceAllStringFunc(src, func(p string) string {
		if v, ok := vars[p]; ok {
			return v
		}
		return p
	}), nil
}

// expandEnv replaces {$NAME} and {%NAME%} in one word, as CoreDNS does
// with its environment; here the values come from vars, and a name
// without one is an error.
func expandEnv(s string, vars Vars) (string, error) {
	var missing string
	out := envRE.ReplaceAllStringFunc(s, func(m string) string {
		name := strings.Trim(m, "{}$%")
		v, ok := vars[name]
		if !ok && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("environment variable %s has no value (give it with --var %s=VALUE)", missing, missing)
	}
	return out, nil
}

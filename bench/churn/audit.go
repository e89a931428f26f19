package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// auditPolicy logs, at Metadata level, the lists and watches of the kinds
// the watchers read: who asked, when, with which resource version, and the
// answer's code. Nothing else is logged.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["list", "watch"]
  resources:
  - group: ""
    resources: ["services", "namespaces", "pods", "nodes"]
  - group: "discovery.k8s.io"
    resources: ["endpointslices"]
- level: None
`

// auditArgs writes the audit policy into dir and returns the kube-apiserver
// flags that log to dir/audit.log.
func auditArgs(dir string) ([]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, fmt.Errorf("writing audit policy: %w", err)
	}
	return []string{"--audit-policy-file=" + policy, "--audit-log-path=" + filepath.Join(dir, "audit.log"),
		"--audit-log-maxsize=0", "--audit-log-format=json"}, nil
}

// auditEvent is the part of an audit.k8s.io/v1 Event read here.
type auditEvent struct {
	Stage          string    `json:"stage"`
	RequestURI     string    `json:"requestURI"`
	Verb           string    `json:"verb"`
	UserAgent      string    `json:"userAgent"`
	StageTimestamp time.Time `json:"stageTimestamp"`
	Received       time.Time `json:"requestReceivedTimestamp"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// requestKind names what a list or watch request asks for: "LIST", a
// streaming list ("watch-list", sendInitialEvents=true), a watch resumed
// from a resource version ("resumed watch") or a watch from none.
func requestKind(verb, uri string) string {
	if verb == "list" {
		return "LIST"
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "watch"
	}
	q := u.Query()
	switch rv := q.Get("resourceVersion"); {
	case q.Get("sendInitialEvents") == "true":
		return "watch-list"
	case rv != "" && rv != "0":
		return "resumed watch"
	}
	return "watch from 0"
}

// stormAudit summarises the hollow watchers' list and watch requests
// answered after since: counts by kind and code, how many watchers relisted
// (a LIST or watch-list answered 200), and when each watcher's last watch
// began streaming again, as "p50 / last" after since and the spread between
// the first and the last watcher.
type stormAudit struct {
	requests map[string]int  // "kind code" -> requests
	relisted int             // watchers with a LIST or watch-list answered 200
	back     []time.Duration // per watcher, its last watch's start after since, sorted
	relists  []time.Duration // each relist's arrival after since, sorted
	peak     int             // most relists arriving within one second
}

func readStormAudit(path string, since time.Time) (*stormAudit, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading audit log: %w", err)
	}
	defer f.Close()
	a := &stormAudit{requests: map[string]int{}}
	relisted := map[string]bool{}
	back := map[string]time.Time{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log %s: %w", path, err)
		}
		if ev.StageTimestamp.Before(since) || !strings.Contains(ev.UserAgent, "-hollow/") {
			continue
		}
		// A watch answered 200 logs ResponseStarted then ResponseComplete:
		// count it once, at its start. Errors log ResponseComplete only.
		kind := requestKind(ev.Verb, ev.RequestURI)
		if ev.Verb == "watch" && ev.ResponseStatus.Code == 200 && ev.Stage != "ResponseStarted" {
			continue
		}
		if ev.Verb == "list" && ev.Stage != "ResponseComplete" {
			continue
		}
		a.requests[fmt.Sprintf("%s %d", kind, ev.ResponseStatus.Code)]++
		who := ev.UserAgent
		if ev.ResponseStatus.Code == 200 {
			if kind == "LIST" || kind == "watch-list" {
				relisted[who] = true
				a.relists = append(a.relists, ev.Received.Sub(since))
			}
			if ev.Verb == "watch" && ev.StageTimestamp.After(back[who]) {
				back[who] = ev.StageTimestamp
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading audit log: %w", err)
	}
	a.relisted = len(relisted)
	for _, t := range back {
		a.back = append(a.back, t.Sub(since))
	}
	slices.Sort(a.back)
	slices.Sort(a.relists)
	for i, j := 0, 0; j < len(a.relists); j++ {
		for a.relists[j]-a.relists[i] >= time.Second {
			i++
		}
		a.peak = max(a.peak, j-i+1)
	}
	return a, nil
}

// awaitRelists reads the audit log every 2 s until it holds want relists
// after since, or 3 minutes have passed (then it returns what it has).
func awaitRelists(ctx context.Context, path string, since time.Time, want int) (*stormAudit, error) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		a, err := readStormAudit(path, since)
		if err != nil || len(a.relists) >= want || time.Now().After(deadline) {
			return a, err
		}
		if !sleep(ctx, 2*time.Second) {
			return a, ctx.Err()
		}
	}
}

// String prints the counts and the watch restarts' times.
func (a *stormAudit) String() string {
	keys := make([]string, 0, len(a.requests))
	for k := range a.requests {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", k, a.requests[k])
	}
	if len(a.back) == 0 {
		return b.String() + "; no watch restarted"
	}
	if n := len(a.relists); n > 0 {
		fmt.Fprintf(&b, "; relists arrived %.1f s to %.1f s after the stop (p50 %.1f s), at most %d within one second",
			a.relists[0].Seconds(), a.relists[n-1].Seconds(), a.relists[n/2].Seconds(), a.peak)
	}
	fmt.Fprintf(&b, "; %d watchers relisted; every watch streaming again after the stop (p50 / last): %.1f s / %.1f s, "+
		"first %.1f s", a.relisted, a.back[len(a.back)/2].Seconds(), a.back[len(a.back)-1].Seconds(), a.back[0].Seconds())
	return b.String()
}

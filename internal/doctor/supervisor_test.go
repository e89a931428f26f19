package doctor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nodecache/nodecache/internal/adminapi"
)

func TestDoctorSupervisor(t *testing.T) {
	for _, tt := range []struct {
		name   string
		sup    *adminapi.Supervisor
		want   Severity
		detail string
	}{
		{"unsupervised", nil, Warn, "--supervise=false"},
		{"quiet", &adminapi.Supervisor{JournalBytes: 5 << 20}, OK, "5.0 MiB cache journal; no restart"},
		{"in-process", &adminapi.Supervisor{JournalBytes: 4096, InProcess: true}, OK, "no nodecache-supervisor beside"},
		{"in-process, not executable", &adminapi.Supervisor{JournalBytes: 4096, InProcess: true,
			InProcessReason: "/usr/local/bin/nodecache-supervisor is not executable: permission denied"}, OK,
			"about 3 MiB less: /usr/local/bin/nodecache-supervisor is not executable: permission denied)"},
		{"restarted", &adminapi.Supervisor{Restarts: 2, LastDeath: "signal: killed", LastDeathAt: time.Now()}, Warn,
			"restarted 2 times"},
		{"crash loop", &adminapi.Supervisor{Restarts: 3, CrashLoop: "supervisor: crash loop: died 3 times"}, Fail, "crash loop"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := fakeNode{}.env(t)
			e.st = &adminapi.Status{Supervisor: tt.sup}
			got := e.checkSupervisor(context.Background())
			if len(got) != 1 || got[0].Severity != tt.want || !strings.Contains(got[0].Detail, tt.detail) {
				t.Fatalf("got %+v, want one %s containing %q", got, tt.want, tt.detail)
			}
			if inProc := strings.Contains(got[0].Detail, "nodecache-supervisor"); tt.sup != nil && inProc != tt.sup.InProcess {
				t.Errorf("got %q: want the in-process note only when InProcess (%v)", got[0].Detail, tt.sup.InProcess)
			}
		})
	}
	e := fakeNode{}.env(t)
	if got := e.checkSupervisor(context.Background()); len(got) != 0 {
		t.Errorf("agent unreachable: got %+v, want no finding (the agent check has one)", got)
	}
}

package doctor

import (
	"context"
	"fmt"
	"time"
)

// checkSupervisor says whether a supervisor keeps the agent's sockets and
// cache for a restart after a crash, and whether the serving process keeps
// dying. It reads what the agent check fetched.
func (e *Env) checkSupervisor(context.Context) []Finding {
	if e.st == nil {
		return nil
	}
	sup := e.st.Supervisor
	switch {
	case sup == nil:
		return []Finding{{Check: "supervisor", Severity: Warn,
			Detail: "the agent runs without a supervisor (--supervise=false): a crash or an OOM kill drops queries until it restarts, cold",
			Fix:    "drop --supervise=false (docs/recovery.md)"}}
	case sup.CrashLoop != "":
		return []Finding{{Check: "supervisor", Severity: Fail, Detail: sup.CrashLoop,
			Fix: "see why it dies: the agent's log before each \"serving process died\" line; an OOM kill shows in dmesg and in the cgroup's memory events (docs/recovery.md)"}}
	case sup.Restarts > 0:
		return []Finding{{Check: "supervisor", Severity: Warn,
			Detail: fmt.Sprintf("the serving process was restarted %d times; the last one ended %s ago: %s",
				sup.Restarts, time.Since(sup.LastDeathAt).Round(time.Second), sup.LastDeath),
			Fix: "see the agent's log around the \"serving process died\" lines (docs/recovery.md)"}}
	}
	how := ""
	if sup.InProcess {
		why := sup.InProcessReason
		if why == "" { // an agent from before the reason was passed on
			why = "no nodecache-supervisor beside the nodecache binary, or it could not be run"
		}
		how = " (in a nodecache process, where nodecache-supervisor would take about 3 MiB less: " + why + ")"
	}
	return []Finding{{Check: "supervisor", Severity: OK,
		Detail: fmt.Sprintf("a supervisor keeps the sockets and a %.1f MiB cache journal; no restart%s", float64(sup.JournalBytes)/(1<<20), how)}}
}

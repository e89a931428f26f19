package agent

import (
	"net/http"
	"net/http/pprof"
)

// handlePprof serves the runtime profiles under /debug/pprof/ on mux
// (`--pprof`, off by default), the mux of the --pprof-addr listener
// (127.0.0.1:6053 by default, never the metrics or health listener): `go
// tool pprof http://127.0.0.1:6053/debug/pprof/profile?seconds=10`
// profiles the hit path under load. The handlers are registered on this
// mux only, never on http.DefaultServeMux.
func handlePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

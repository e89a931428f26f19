package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/nodecache/nodecache/pkg/cache"
	"github.com/nodecache/nodecache/pkg/kubezone"
)

// Agent is what the admin API's server asks of the running agent. The
// handler parses and checks the parameters; the agent answers with typed
// values. An error made by Errorf is answered with its status code and
// message, any other error with 502 Bad Gateway.
type Agent interface {
	Status() Status
	// Query asks name (a FQDN) and qtype through the agent's own
	// resolution path.
	Query(ctx context.Context, name string, qtype uint16) (Query, error)
	Reload() Reload
	Upstreams() []Upstream
	CacheStats() cache.Stats
	CacheDump(filter string, limit int) []cache.EntryInfo
	// CacheFlush gets a scope with exactly one field set, its name a FQDN.
	CacheFlush(s FlushScope) Flush
	ZoneList(ns string) ([]kubezone.Record, error)
	ZoneShow(name string) ([]kubezone.Record, error)
	PodByName(ns, name string) (kubezone.PodInfo, error)
	PodByIP(ip netip.Addr) (kubezone.PodInfo, error)
	Top(n int) Top
	// ServeTail streams PathTail; the stream stays with the agent, which
	// turns its queries into TailLines only for a listening subscriber.
	ServeTail(w http.ResponseWriter, r *http.Request)
}

// StatusError is an error the server answers with HTTP status Code.
type StatusError struct {
	Code int
	Err  error
}

func (e *StatusError) Error() string { return e.Err.Error() }

func (e *StatusError) Unwrap() error { return e.Err }

// Errorf returns an error the server answers with status code and the
// formatted message.
func Errorf(code int, format string, args ...any) error {
	return &StatusError{Code: code, Err: fmt.Errorf(format, args...)}
}

// NewHandler returns the admin API's handler over a.
func NewHandler(a Agent) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathStatus, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.Status()) })
	mux.HandleFunc("GET "+PathQuery, func(w http.ResponseWriter, r *http.Request) { serveQuery(a, w, r) })
	mux.HandleFunc("POST "+PathReload, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.Reload()) })
	mux.HandleFunc("GET "+PathUpstreams, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.Upstreams()) })
	mux.HandleFunc("GET "+PathCacheStats, func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, a.CacheStats()) })
	mux.HandleFunc("GET "+PathCacheDump, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		writeJSON(w, a.CacheDump(q.Get("filter"), atoiDefault(q.Get("limit"), 1000)))
	})
	mux.HandleFunc("POST "+PathCacheFlush, func(w http.ResponseWriter, r *http.Request) { serveFlush(a, w, r) })
	mux.HandleFunc("GET "+PathZoneList, func(w http.ResponseWriter, r *http.Request) {
		answer[[]kubezone.Record](w)(a.ZoneList(r.URL.Query().Get("namespace")))
	})
	mux.HandleFunc("GET "+PathZoneShow, func(w http.ResponseWriter, r *http.Request) {
		answer[[]kubezone.Record](w)(a.ZoneShow(r.URL.Query().Get("name")))
	})
	mux.HandleFunc("GET "+PathTop, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, a.Top(atoiDefault(r.URL.Query().Get("n"), 20)))
	})
	mux.HandleFunc("GET "+PathTail, a.ServeTail)
	mux.HandleFunc("GET "+PathPod, func(w http.ResponseWriter, r *http.Request) { servePod(a, w, r) })
	return mux
}

// answer returns a function that writes v, or err as its status.
func answer[T any](w http.ResponseWriter) func(v T, err error) {
	return func(v T, err error) {
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, v)
	}
}

// serveQuery is PathQuery: name=NAME and type=TYPE (default A).
func serveQuery(a Agent, w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	typ := strings.ToUpper(r.URL.Query().Get("type"))
	if typ == "" {
		typ = "A"
	}
	qtype, ok := dns.StringToType[typ]
	if !ok || name == "" {
		http.Error(w, "want name=NAME and type=TYPE (A, AAAA, SRV, PTR, ...)", http.StatusBadRequest)
		return
	}
	answer[Query](w)(a.Query(r.Context(), dns.Fqdn(name), qtype))
}

// serveFlush is PathCacheFlush with exactly one of name=NAME, zone=SUFFIX
// or all=true; with none it flushes nothing and says so.
func serveFlush(a Agent, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s := FlushScope{Name: q.Get("name"), Zone: q.Get("zone"), All: q.Get("all") == "true"}
	set := 0
	for _, on := range []bool{s.Name != "", s.Zone != "", s.All} {
		if on {
			set++
		}
	}
	if set != 1 {
		http.Error(w, "flush: want exactly one of name=NAME, zone=SUFFIX or all=true", http.StatusBadRequest)
		return
	}
	if target := s.Name + s.Zone; !s.All {
		if _, ok := dns.IsDomainName(target); !ok {
			http.Error(w, fmt.Sprintf("flush: %q is not a domain name", target), http.StatusBadRequest)
			return
		}
	}
	if s.Name != "" {
		s.Name = dns.Fqdn(s.Name)
	}
	if s.Zone != "" {
		s.Zone = dns.Fqdn(s.Zone)
	}
	writeJSON(w, a.CacheFlush(s))
}

// servePod is PathPod: ip=IP or name=NAMESPACE/NAME, one of the node's
// pods.
func servePod(a Agent, w http.ResponseWriter, r *http.Request) {
	if nsName := r.URL.Query().Get("name"); nsName != "" {
		ns, name, ok := strings.Cut(nsName, "/")
		if !ok {
			http.Error(w, "name: want NAMESPACE/NAME", http.StatusBadRequest)
			return
		}
		answer[kubezone.PodInfo](w)(a.PodByName(ns, name))
		return
	}
	ip, err := netip.ParseAddr(r.URL.Query().Get("ip"))
	if err != nil {
		http.Error(w, "want ip=IP or name=NAMESPACE/NAME", http.StatusBadRequest)
		return
	}
	answer[kubezone.PodInfo](w)(a.PodByIP(ip))
}

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusBadGateway
	var se *StatusError
	if errors.As(err, &se) {
		code = se.Code
	}
	http.Error(w, err.Error(), code)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func atoiDefault(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n
	}
	return def
}

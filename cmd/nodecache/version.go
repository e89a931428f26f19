package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// buildVersion is what a binary says about its own build: the version and
// where it came from.
type buildVersion struct {
	Version  string // the release tag (-ldflags -X main.version), else Go's module version, else "dev"
	Commit   string // vcs.revision from Go's build info; "" when the build had no VCS stamp
	Modified bool   // the work tree had uncommitted changes
	Go       string // the toolchain, e.g. go1.26.8
	Platform string // GOOS/GOARCH the binary was built for
}

// readVersion combines the version and commit stamped with -ldflags
// (stamped is "dev" and stampedCommit "" when none was) with the build info
// Go embeds in every binary (bi may be nil): its vcs.revision wins over a
// stamped commit, which serves builds without a VCS stamp (-buildvcs=false,
// a git worktree). A release build (make build, make release, make image) stamps the
// tag; a plain `go build` inside a git checkout still names its commit, and
// Go 1.24+ derives a module version from the tag or a pseudo-version from
// the commit. (Go stamps a clone, not a git worktree, whose .git is a file.)
func readVersion(stamped, stampedCommit string, bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: stamped, Commit: stampedCommit, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if v.Version == "" {
		v.Version = "dev"
	}
	if bi == nil {
		return v
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	if v.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the line `nodecache version` prints, e.g.
//
//	nodecache v0.1.0 commit 3f1c0de9a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0 go1.26.8 linux/amd64
//
// with "-modified" after a commit whose work tree had changes, and commit
// "unknown" for a build with neither a VCS stamp nor -X main.commit (go
// build -buildvcs=false, or outside a git checkout).
func (v buildVersion) String() string {
	commit := "unknown"
	if v.Commit != "" {
		commit = v.Commit
		if v.Modified {
			commit += "-modified"
		}
	}
	return fmt.Sprintf("nodecache %s commit %s %s %s", v.Version, commit, v.Go, v.Platform)
}

// currentVersion reads this binary's own build.
func currentVersion() buildVersion {
	bi, _ := debug.ReadBuildInfo()
	return readVersion(version, commit, bi)
}

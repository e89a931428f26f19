#!/usr/bin/env bash
# Sets up what `make test` needs on a Debian machine, as root: the packages
# the e2e suite drives (dig, kdig, dnsperf, unbound, nsd, iptables, nft,
# conntrack, for the real node containerd, runc and the CNI plugins, and
# musl-tools for the musl client of TestTruncatedClients) and
# the kernel modules the agent and the suite use. `make test` runs it first
# and .ci/run runs it through `make test`, so a fresh machine needs nothing
# but Go and make. Idempotent: a machine that has everything costs one
# dpkg-query.
#
#   hack/install-deps.sh            # install what is missing (root)
#   hack/install-deps.sh --check    # only say what is missing; exit 1 if any
#
# Not root and something missing: it names the packages and exits 1 rather
# than let the e2e suite skip. The Kubernetes binaries and CoreDNS are built
# by e2e/tools/build-k8s.sh and bench/build-coredns.sh (cached), the image
# by `make image`; this script installs only what comes from Debian.
set -euo pipefail

log() { echo "install-deps: $*" >&2; }

# nftables: the nft command, which kube-proxy's nftables mode runs to write
# its rules (TestKubeProxyIntercept, TestRealNodeKubeProxy).
pkgs=(ca-certificates git make gcc libc6-dev iproute2 iptables conntrack nftables
  bind9-dnsutils knot-dnsutils dnsperf unbound nsd kmod curl util-linux
  containerd runc containernetworking-plugins musl-tools)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "${1:-}" = "--check" ] || [ "$(id -u)" -ne 0 ]; then
    log "missing Debian packages: ${missing[*]}"
    log "run as root (make test needs root for the e2e suite), or: apt-get install ${missing[*]}"
    exit 1
  fi
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
  # The packages start daemons we do not want listening on :53 or owning
  # the real node's containerd socket.
  for svc in unbound nsd containerd; do
    systemctl disable --now "$svc" >/dev/null 2>&1 || true
  done
fi

if [ "${1:-}" = "--check" ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  log "not root: the e2e suite needs root (network namespaces, iptables); make unit runs without it"
  exit 1
fi

# Load the kernel modules the agent and the suite use, where the kernel has
# them as modules; built-in or absent is fine (the suite adapts to a kernel
# without dummy links and says so).
for m in dummy veth nf_conntrack xt_CT xt_NOTRACK iptable_raw nft_ct; do
  modprobe "$m" 2>/dev/null || true
done

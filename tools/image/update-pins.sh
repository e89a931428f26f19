#!/usr/bin/env bash
# Re-resolves tools/image/debian-pins.txt: the newest version of each image
# package (iptables, conntrack, ca-certificates, netbase and everything they
# depend on) in the suite, its -updates and its -security archive, for amd64
# and arm64, each index checked against its InRelease with gpgv and Debian's
# archive keyring. Run it on a Debian machine (gpgv, debian-archive-keyring),
# review the diff (git diff tools/image/debian-pins.txt), run make image and
# the tests, and commit the pins with the versions in the message.
#
#   tools/image/update-pins.sh                   # same suite as now
#   tools/image/update-pins.sh -suite trixie     # move to another suite
#
# `make image-pins` runs it. docs/image.md says more.
set -euo pipefail
cd "$(dirname "$0")"
exec go run . pins -out debian-pins.txt "$@"

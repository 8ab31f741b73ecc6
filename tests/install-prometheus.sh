#!/usr/bin/env bash
# Unpack Debian's `prometheus` package (Prometheus and promtool) into a cache
# directory, without root and without starting a service, for the monitoring
# tests and for development:
#
#     bash tests/install-prometheus.sh [DEST]      # DEST defaults to .venv/prometheus
#
# gives DEST/usr/bin/prometheus and DEST/usr/bin/promtool. `make test` runs it
# once (the Makefile's PROMETHEUS_STAMP); tests/prometheus_bin.py finds the
# binaries there. Running it again does nothing when both binaries work.
#
# `apt-get download` needs Debian's package index: when it fails and this runs as
# root, the script runs `apt-get update` once and tries again; otherwise it stops
# and says what to run.
set -euo pipefail

DEST=${1:-${VENV:-.venv}/prometheus}
PACKAGE=prometheus
PROMETHEUS=$DEST/usr/bin/prometheus
PROMTOOL=$DEST/usr/bin/promtool

say() { echo "install-prometheus: $*"; }
fail() {
    echo "install-prometheus: error: $*" >&2
    exit 1
}

if [ -x "$PROMETHEUS" ] && [ -x "$PROMTOOL" ] && "$PROMTOOL" --version >/dev/null 2>&1; then
    say "already installed: $PROMETHEUS, $PROMTOOL ($("$PROMTOOL" --version 2>&1 | head -n 1))"
    exit 0
fi

command -v apt-get >/dev/null 2>&1 || fail "apt-get not found: this needs a Debian machine"
command -v dpkg >/dev/null 2>&1 || fail "dpkg not found: this needs a Debian machine"

mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
PROMETHEUS=$DEST/usr/bin/prometheus
PROMTOOL=$DEST/usr/bin/promtool
DEBS=$DEST/debs
rm -rf "$DEBS"
mkdir -p "$DEBS"

download() {
    if [ "$(id -u)" = 0 ]; then
        # as root apt fetches as user _apt, who may not reach DEST: fetch as root
        (cd "$DEBS" && apt-get -o APT::Sandbox::User=root download "$PACKAGE")
    else
        (cd "$DEBS" && apt-get download "$PACKAGE")
    fi
}

say "downloading Debian's $PACKAGE package: (cd $DEBS && apt-get download $PACKAGE)"
if ! download; then
    if [ "$(id -u)" = 0 ]; then
        say "apt-get download failed; updating the package index (apt-get update) and retrying"
        apt-get update -q || fail "apt-get update failed"
        download || fail "apt-get download $PACKAGE failed even after apt-get update:
    is Debian's package index reachable? Retry with: bash tests/install-prometheus.sh $DEST"
    else
        fail "apt-get download $PACKAGE failed (see above). Debian's package index may be
    missing or stale: run 'sudo apt-get update', then: bash tests/install-prometheus.sh $DEST"
    fi
fi

shopt -s nullglob
debs=("$DEBS"/"$PACKAGE"_*.deb)
[ "${#debs[@]}" -eq 1 ] || fail "expected one ${PACKAGE}_*.deb in $DEBS, found ${#debs[@]}"
deb=${debs[0]}
say "unpacking $(basename "$deb") ($(du -h "$deb" | cut -f1)) into $DEST: dpkg -x (no maintainer scripts, no service)"
dpkg -x "$deb" "$DEST"
rm -rf "$DEBS"

[ -x "$PROMETHEUS" ] || fail "$deb has no usr/bin/prometheus"
[ -x "$PROMTOOL" ] || fail "$deb has no usr/bin/promtool"
"$PROMTOOL" --version >/dev/null 2>&1 || fail "$PROMTOOL does not run"
say "installed: $PROMETHEUS, $PROMTOOL ($("$PROMTOOL" --version 2>&1 | head -n 1)), $(du -sh "$DEST" | cut -f1) in $DEST"

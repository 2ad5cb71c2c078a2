#!/usr/bin/env bash
# Installs what failmode's tests and runs need, only where it is missing. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*"; }

if command -v redis-server >/dev/null 2>&1; then
  say "redis-server found: $(redis-server --version | head -n1)"
else
  say "redis-server is missing; installing Debian's redis-server package"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends redis-server >/dev/null
  # The package starts a system-wide server on 6379; failmode starts its own on free ports.
  if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true; fi
  say "installed $(redis-server --version | head -n1)"
fi

# Toxiproxy (Shopify), pinned, built from source with Go into the git-ignored .tools/bin.
# Version is stamped in with -ldflags, as the project's release builds do; otherwise
# `toxiproxy-server -version` and GET /version answer "git".
TOXIPROXY_VERSION=2.12.0
TOXIPROXY_PKG=github.com/Shopify/toxiproxy/v2
if command -v toxiproxy-server >/dev/null 2>&1; then
  say "toxiproxy-server found: $(command -v toxiproxy-server) ($(toxiproxy-server -version 2>&1 | head -n1))"
elif [ -x .tools/bin/toxiproxy-server ]; then
  say "toxiproxy-server found: .tools/bin/toxiproxy-server ($(.tools/bin/toxiproxy-server -version 2>&1 | head -n1))"
else
  GO=$(command -v go || true)
  if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; fi
  if [ -z "$GO" ]; then
    say "toxiproxy-server is missing and building it needs Go 1.23 or later, which is not installed."
    say "Get Go from https://go.dev/dl/ (or your package manager, e.g. apt-get install golang-go),"
    say "or put a toxiproxy-server ${TOXIPROXY_VERSION} binary on PATH or at .tools/bin/toxiproxy-server."
    exit 1
  fi
  say "toxiproxy-server is missing; building ${TOXIPROXY_PKG}/cmd/server@v${TOXIPROXY_VERSION} with $("$GO" version | cut -d' ' -f3) into .tools/bin/toxiproxy-server"
  mkdir -p .tools/gobin .tools/bin
  GOBIN="$PWD/.tools/gobin" "$GO" install \
    -ldflags "-s -w -X ${TOXIPROXY_PKG}.Version=${TOXIPROXY_VERSION}" \
    "${TOXIPROXY_PKG}/cmd/server@v${TOXIPROXY_VERSION}"
  # `go install` names the binary after its package directory: cmd/server -> server.
  mv -f .tools/gobin/server .tools/bin/toxiproxy-server
  say "installed $(.tools/bin/toxiproxy-server -version 2>&1 | head -n1)"
fi

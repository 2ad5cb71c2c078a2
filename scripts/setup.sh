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

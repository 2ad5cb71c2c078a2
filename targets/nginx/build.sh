#!/usr/bin/env bash
# The nginx target's build step: installs Debian's nginx-light only when `nginx` is missing.
# Idempotent. The package's own system-wide server is stopped and disabled: failmode starts
# one nginx master per instance (targets/nginx/run.sh).
set -euo pipefail
say() { printf 'nginx build: %s\n' "$*"; }

find_nginx() { command -v nginx 2>/dev/null || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true; }

NGINX=$(find_nginx)
if [ -n "$NGINX" ]; then
  say "nginx found: $NGINX ($("$NGINX" -v 2>&1 | head -n1))"
  exit 0
fi
say "nginx is missing; installing Debian's nginx-light package"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nginx-light >/dev/null
# The package starts a system-wide server on port 80; failmode starts its own.
if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now nginx >/dev/null 2>&1 || true; fi
if [ -f /run/nginx.pid ]; then
  pid=$(cat /run/nginx.pid)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    say "stopping the package's nginx (pid $pid)"
    $SUDO kill -QUIT "$pid" || true
  fi
fi
NGINX=$(find_nginx)
say "installed $NGINX ($("$NGINX" -v 2>&1 | head -n1))"

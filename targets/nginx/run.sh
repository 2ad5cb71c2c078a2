#!/usr/bin/env bash
# One failmode instance of the nginx-limit-req target: renders an nginx.conf from env into
# a per-instance directory and execs nginx in the foreground (daemon off, one master, one
# worker), so the harness's SIGTERM reaches the nginx master (fast shutdown).
# A missing or invalid setting stops it with exit code 64, one line per problem.
# FAILMODE_REDIS_URL is accepted and ignored: nginx's limit_req keeps its counts in the
# worker's shared memory, so every instance limits alone. NGINX_RATE says at what:
# "limit" (each instance the whole limit: limit x instances in total) or "share" (limit /
# instances each, what a store-less deployment must configure to hold the limit in total).
set -uo pipefail

problems=()
need() { if [ -z "${!1:-}" ]; then problems+=("$1 is missing"); fi; }
whole() { [[ "${!1:-}" =~ ^[0-9]+$ ]] && [ "${!1}" -ge "$2" ] || problems+=("$1=\"${!1:-}\": want a whole number >= $2"); }

for v in FAILMODE_BIND FAILMODE_PORT FAILMODE_INSTANCE_ID FAILMODE_LIMIT FAILMODE_WINDOW_MS \
         FAILMODE_CALLER_HEADER NGINX_BURST NGINX_RATE; do need "$v"; done
# 127.0.0.1 as failmode starts it; 0.0.0.0 only as the container image sets it
# (targets/nginx/Dockerfile: docker-compose.yml publishes the port on the host's loopback).
if [ -n "${FAILMODE_BIND:-}" ] && [ "$FAILMODE_BIND" != 127.0.0.1 ] && [ "$FAILMODE_BIND" != 0.0.0.0 ]; then
  problems+=("FAILMODE_BIND=\"$FAILMODE_BIND\": must be 127.0.0.1 (or 0.0.0.0 inside the container image)")
fi
[ -n "${FAILMODE_PORT:-}" ] && { whole FAILMODE_PORT 1; }
[ -n "${FAILMODE_LIMIT:-}" ] && { whole FAILMODE_LIMIT 1; }
[ -n "${FAILMODE_WINDOW_MS:-}" ] && { whole FAILMODE_WINDOW_MS 1; }
if [ -n "${FAILMODE_CALLER_HEADER:-}" ] && ! [[ "$FAILMODE_CALLER_HEADER" =~ ^[A-Za-z0-9-]+$ ]]; then
  problems+=("FAILMODE_CALLER_HEADER=\"$FAILMODE_CALLER_HEADER\": want a header name (letters, digits, -)")
fi
if [ -n "${FAILMODE_INSTANCE_ID:-}" ] && ! [[ "$FAILMODE_INSTANCE_ID" =~ ^[A-Za-z0-9._-]+$ ]]; then
  problems+=("FAILMODE_INSTANCE_ID=\"$FAILMODE_INSTANCE_ID\": want letters, digits, . _ -")
fi
case "${NGINX_RATE:-}" in
  "") ;;
  limit) ;;
  share) need FAILMODE_INSTANCE_COUNT; [ -n "${FAILMODE_INSTANCE_COUNT:-}" ] && whole FAILMODE_INSTANCE_COUNT 1 ;;
  *) problems+=("NGINX_RATE=\"$NGINX_RATE\": want limit or share") ;;
esac
# NGINX_BURST: "limit-1" (a bucket of the instance's whole quota, the same shape as
# redis_rate's Burst = limit) or a whole number.
case "${NGINX_BURST:-}" in
  "") ;;
  limit-1) ;;
  *) whole NGINX_BURST 0 ;;
esac

# nginx takes a rate only as whole requests per second or per minute. The instance's quota
# is limit / share_of per window: share_of is 1, or the instance count under NGINX_RATE=share.
rate=
if [ ${#problems[@]} -eq 0 ]; then
  limit=$FAILMODE_LIMIT window=$FAILMODE_WINDOW_MS share_of=1
  [ "$NGINX_RATE" = share ] && share_of=$FAILMODE_INSTANCE_COUNT
  per=$((window * share_of))
  if [ $((limit * 1000 % per)) -eq 0 ]; then
    rate="$((limit * 1000 / per))r/s"
  elif [ $((limit * 60000 % per)) -eq 0 ]; then
    rate="$((limit * 60000 / per))r/m"
  else
    problems+=("FAILMODE_LIMIT=$limit per FAILMODE_WINDOW_MS=$window (NGINX_RATE=$NGINX_RATE, $share_of instance(s) sharing it) is not a whole number of requests per second or per minute, the only rates nginx takes")
  fi
  # A bucket of the whole quota, rounded down (nodelay admits burst + 1 at once), at least 1.
  quota=$((limit / share_of))
  if [ "$NGINX_BURST" = limit-1 ]; then burst=$((quota > 1 ? quota - 1 : 0)); else burst=$NGINX_BURST; fi
fi

NGINX=$(command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; } || true)
[ -n "$NGINX" ] || problems+=("nginx is not installed (targets/nginx/build.sh installs it)")

if [ ${#problems[@]} -gt 0 ]; then
  for p in "${problems[@]}"; do echo "invalid setting: $p" >&2; done
  exit 64
fi

var="http_$(echo "$FAILMODE_CALLER_HEADER" | tr 'A-Z-' 'a-z_')"
dir="${TMPDIR:-/tmp}/failmode-nginx/${FAILMODE_INSTANCE_ID}-${FAILMODE_PORT}"
rm -rf "$dir" && mkdir -p "$dir/tmp" "$dir/www" || exit 1
# /api's answer is a static file: a `return` would answer in nginx's rewrite phase, before
# limit_req (preaccess phase) runs, and nothing would ever be limited.
printf ok >"$dir/www/api"

cat >"$dir/nginx.conf" <<CONF
# rendered by targets/nginx/run.sh for instance $FAILMODE_INSTANCE_ID
daemon off;
master_process on;
worker_processes 1;
pid $dir/nginx.pid;
error_log stderr error;

events {
    worker_connections 4096;
}

http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    server_tokens off;
    keepalive_requests 100000;

    # \$$var is the $FAILMODE_CALLER_HEADER header. $FAILMODE_LIMIT per ${FAILMODE_WINDOW_MS} ms, NGINX_RATE=$NGINX_RATE: $rate.
    limit_req_zone \$$var zone=callers:10m rate=$rate;
    # limit_req_status left at its default, 503. Refusals are logged at "warn", below error_log's level.
    limit_req_log_level warn;

    server {
        listen $FAILMODE_BIND:$FAILMODE_PORT;

        location = /healthz {
            default_type text/plain;
            return 200 "ok\n";
        }

        location = /api {
            if (\$$var = "") {
                return 400 "missing $FAILMODE_CALLER_HEADER header\n";
            }
            limit_req zone=callers burst=$burst nodelay;
            root $dir/www;
            default_type text/plain;
            etag off;
            add_header Cache-Control no-store;
        }
    }
}
CONF

echo "started {\"target\":\"nginx-limit-req\",\"instance\":\"$FAILMODE_INSTANCE_ID\",\"nginx\":\"$("$NGINX" -v 2>&1 | sed 's/^nginx version: //')\",\"rate_of\":\"$NGINX_RATE\",\"rate\":\"$rate\",\"burst\":$burst,\"nodelay\":true,\"limit_req_status\":503,\"store\":\"none (worker shared memory; FAILMODE_REDIS_URL ignored)\",\"conf\":\"$dir/nginx.conf\"}"
exec "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e stderr

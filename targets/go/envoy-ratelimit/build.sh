#!/usr/bin/env bash
# Builds envoyproxy/ratelimit's service (src/service_cmd, pinned by the `tool` line in go.mod)
# into .tools/bin/envoy-ratelimit and the front (front/) into .tools/bin/failmode-envoy-front.
# Run from anywhere; paths are relative to the workspace root. Rebuilds only when go.mod,
# go.sum, front/*.go, this script or the Go version changed (digest stamp next to the binaries),
# or a binary is missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
bin="$root/.tools/bin"
stamp="$bin/.envoy-ratelimit.stamp"
mkdir -p "$bin"
cd "$here"
digest="$( { go version; cat go.mod go.sum build.sh front/*.go; } | sha256sum | cut -d' ' -f1)"
if [[ -x "$bin/envoy-ratelimit" && -x "$bin/failmode-envoy-front" && -f "$stamp" && "$(cat "$stamp")" == "$digest" ]]; then
  echo "envoy-ratelimit: up to date ($(go list -m -f '{{.Path}}@{{.Version}}' github.com/envoyproxy/ratelimit), digest ${digest:0:12})"
  exit 0
fi
rm -f "$stamp"
echo "envoy-ratelimit: go build $(go list -m -f '{{.Path}}@{{.Version}}' github.com/envoyproxy/ratelimit)/src/service_cmd -> .tools/bin/envoy-ratelimit"
go build -trimpath -o "$bin/envoy-ratelimit" github.com/envoyproxy/ratelimit/src/service_cmd
echo "envoy-ratelimit: go build ./front -> .tools/bin/failmode-envoy-front"
go build -trimpath -o "$bin/failmode-envoy-front" ./front
echo "$digest" > "$stamp"
echo "envoy-ratelimit: built (digest ${digest:0:12})"

#!/usr/bin/env bash
# The traefik-ratelimit target's build step: builds .tools/bin/failmode-traefik-ratelimit
# (git-ignored) with `go build`, only when the sources, go.mod, go.sum or the Go version changed
# since the last build (a digest stamped next to the binary, as scripts/setup.sh does for
# node_modules). Traefik's middleware package imports half of Traefik (its tracing pulls in the
# static configuration, hence the ACME provider and lego's DNS providers): the first build on a
# machine downloads ~340 modules and compiles them, measured here at 15 min of CPU
# (about 8–10 min on 2 idle cores, 22 min beside another build) and 3 GB of memory, for a
# ~100 MB binary; later builds come from Go's build cache.
set -euo pipefail
cd "$(dirname "$0")/../../.."
say() { printf 'traefik-ratelimit build: %s\n' "$*"; }

SRC=targets/go/traefik-ratelimit
BIN=.tools/bin/failmode-traefik-ratelimit
STAMP=.tools/bin/failmode-traefik-ratelimit.sha256

GO=$(command -v go || true)
if [ -z "$GO" ] && [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go; fi
if [ -z "$GO" ]; then
  say "building this target needs Go (go.mod's version or later), which is not installed; see https://go.dev/dl/"
  exit 1
fi

digest=$({ "$GO" version; cd "$SRC" && sha256sum go.mod go.sum ./*.go; } | sha256sum | cut -d' ' -f1)
if [ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$digest" ]; then
  say "$BIN is current"
  exit 0
fi
say "go build -C $SRC -o $PWD/$BIN . ($("$GO" version | cut -d' ' -f3), versions from go.sum; the first build on a machine takes minutes)"
mkdir -p .tools/bin
"$GO" build -C "$SRC" -mod=readonly -trimpath -o "$PWD/$BIN" .
echo "$digest" >"$STAMP"
say "built $BIN"

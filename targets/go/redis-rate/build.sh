#!/usr/bin/env bash
# The go-redis-rate target's build step: builds .tools/bin/failmode-redis-rate (git-ignored)
# with `go build`, only when the sources, go.mod, go.sum or the Go version changed since the
# last build (a digest stamped next to the binary, as scripts/setup.sh does for node_modules).
set -euo pipefail
cd "$(dirname "$0")/../../.."
say() { printf 'go-redis-rate build: %s\n' "$*"; }

SRC=targets/go/redis-rate
BIN=.tools/bin/failmode-redis-rate
STAMP=.tools/bin/failmode-redis-rate.sha256

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
say "go build -C $SRC -o $PWD/$BIN . ($("$GO" version | cut -d' ' -f3), versions from go.sum)"
mkdir -p .tools/bin
"$GO" build -C "$SRC" -mod=readonly -trimpath -o "$PWD/$BIN" .
echo "$digest" >"$STAMP"
say "built $BIN"

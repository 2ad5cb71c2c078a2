#!/usr/bin/env bash
# The build step of a Go peer target that is one `package main` module: builds
# .tools/bin/failmode-NAME (git-ignored) from targets/go/DIR with `go build`, only when the
# sources, go.mod, go.sum or the Go version changed since the last build (a digest stamped next
# to the binary, as scripts/setup.sh does for node_modules). Each target's build.sh calls it:
#   targets/go/build-module.sh DIR NAME [NOTE]
# NOTE is added to the build line (e.g. that a first build takes minutes).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=$1 NAME=$2 NOTE=${3:-}
say() { printf '%s build: %s\n' "$NAME" "$*"; }

SRC=targets/go/$DIR
BIN=.tools/bin/failmode-$NAME
STAMP=.tools/bin/failmode-$NAME.sha256

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
say "go build -C $SRC -o $PWD/$BIN . ($("$GO" version | cut -d' ' -f3), versions from go.sum${NOTE:+; $NOTE})"
mkdir -p .tools/bin
"$GO" build -C "$SRC" -mod=readonly -trimpath -o "$PWD/$BIN" .
echo "$digest" >"$STAMP"
say "built $BIN"

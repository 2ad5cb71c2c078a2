#!/usr/bin/env bash
# Installs what failmode's tests and runs need, only where it is missing. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'setup: %s\n' "$*"; }

# `scripts/setup.sh` sets up everything; `scripts/setup.sh node python` only those parts
# (target manifests call it that way as their build step).
PARTS=("$@")
if [ ${#PARTS[@]} -eq 0 ]; then PARTS=(redis toxiproxy node python go rust java nginx hdrhistogram chromium); fi

# A dependency folder is current when the digest of the lockfile it was installed from is
# the one stamped inside it.
digest() { sha256sum "$1" | cut -d' ' -f1; }
is_current() { [ -f "$2" ] && [ "$(cat "$2")" = "$(digest "$1")" ]; }

setup_redis() {
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
}

# Toxiproxy (Shopify), pinned, built from source with Go into the git-ignored .tools/bin.
# Version is stamped in with -ldflags, as the project's release builds do; otherwise
# `toxiproxy-server -version` and GET /version answer "git".
setup_toxiproxy() {
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
}

# The Node.js peer targets (targets/node): exact versions from package-lock.json, installed
# with `npm ci` into the git-ignored targets/node/node_modules.
setup_node() {
  local dir=targets/node stamp=targets/node/node_modules/.failmode-lock-sha256
  if ! command -v npm >/dev/null 2>&1; then
    say "the Node.js targets need Node.js 20.19 or later with npm, which is not installed"
    say "(Debian: apt-get install nodejs npm; or https://nodejs.org/)."
    exit 1
  fi
  if is_current "$dir/package-lock.json" "$stamp"; then
    say "node targets: $dir/node_modules matches package-lock.json"
  else
    say "node targets: npm ci in $dir (Node $(node --version), versions from package-lock.json)"
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
    digest "$dir/package-lock.json" >"$stamp"
  fi
  # Every installed version is the locked one, and this Node can load them.
  node "$dir/lib/check-install.js"
}

# The Python peer targets (targets/python): pinned, hashed requirements in a git-ignored
# virtualenv at .tools/python.
setup_python() {
  local req=targets/python/requirements.txt venv=.tools/python
  local stamp=$venv/.failmode-requirements-sha256
  if is_current "$req" "$stamp"; then
    say "python targets: $venv matches $req"
    return
  fi
  if ! command -v python3 >/dev/null 2>&1; then
    say "the Python targets need python3 (3.10 or later) with venv, which is not installed"
    say "(Debian: apt-get install python3 python3-venv)."
    exit 1
  fi
  say "python targets: installing $req into $venv ($(python3 --version))"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --require-hashes -r "$req"
  digest "$req" >"$stamp"
}

# The Go peer targets (targets/go/*: envoy-ratelimit, redis-rate, traefik-ratelimit): each one's
# build.sh builds its pinned module into .tools/bin, only when its sources or go.sum changed.
# traefik-ratelimit's first build on a machine is the long one (much of Traefik: ~15 min of CPU,
# 3 GB of memory); later ones come from Go's build cache.
setup_go() {
  local script
  for script in targets/go/*/build.sh; do
    [ -x "$script" ] || continue
    if ! command -v go >/dev/null 2>&1; then
      say "the Go targets need Go 1.23 or later, which is not installed (https://go.dev/dl/)"
      exit 1
    fi
    "$script" | sed 's/^/setup: /'
  done
}

# The Rust peer targets (targets/rust/*): each one's build.sh builds its own cargo project
# (exact versions in its Cargo.lock, `--locked`) into .tools/bin, only when its sources or
# Cargo.lock changed. The cargo that builds failmode builds them.
setup_rust() {
  local script
  for script in targets/rust/*/build.sh; do
    [ -x "$script" ] || continue
    if ! command -v cargo >/dev/null 2>&1; then
      say "the Rust targets need Rust 1.88 or later with cargo, which is not installed (https://rustup.rs/)"
      exit 1
    fi
    "$script" 2>&1 | sed 's/^/setup: /'
  done
}

# The Java peer targets (targets/java/*): each one's build.sh builds its Maven project (exact
# versions in its pom.xml) into .tools, only when its sources, pom or the Java version changed.
# Maven and a JDK are Debian's, installed if missing.
setup_java() {
  local script
  for script in targets/java/*/build.sh; do
    [ -x "$script" ] || continue
    if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
      say "java targets: Maven or a JDK is missing; installing Debian's maven and default-jdk-headless"
      if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
      $SUDO apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends maven default-jdk-headless >/dev/null
    fi
    "$script" | sed 's/^/setup: /'
  done
}

# HdrHistogram's Java library (Maven Central), the independent reader the tests open the
# results' interval logs with (harness/tests/hlog_interop.rs), into .tools/java/hdrhistogram.
HDRHISTOGRAM_VERSION=2.2.2
setup_hdrhistogram() {
  local dir=.tools/java/hdrhistogram
  local jar=$dir/HdrHistogram-$HDRHISTOGRAM_VERSION.jar
  [ -f "$jar" ] && return 0
  if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
    say "hdrhistogram: Maven or a JDK is missing; installing Debian's maven and default-jdk-headless"
    if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends maven default-jdk-headless >/dev/null
  fi
  say "fetching org.hdrhistogram:HdrHistogram:$HDRHISTOGRAM_VERSION into $dir"
  mvn -q -B -Dmaven.repo.local=.tools/m2 dependency:copy \
    -Dartifact=org.hdrhistogram:HdrHistogram:$HDRHISTOGRAM_VERSION -DoutputDirectory="$dir"
  [ -f "$jar" ] || { say "hdrhistogram: $jar was not fetched"; exit 1; }
}

# NGINX limit_req, the store-less baseline: Debian's nginx, installed if missing.
setup_nginx() {
  if [ -x targets/nginx/build.sh ]; then targets/nginx/build.sh | sed 's/^/setup: /'; fi
}

# Headless Chromium, which the report and compare tests render their pages in to measure
# them as a reader sees them (harness/tests/support/browser.rs): Debian's chromium if missing.
setup_chromium() {
  if [ -n "${FAILMODE_CHROMIUM:-}" ]; then
    [ -x "$FAILMODE_CHROMIUM" ] || { say "FAILMODE_CHROMIUM=$FAILMODE_CHROMIUM is not an executable"; exit 1; }
    say "chromium found: $FAILMODE_CHROMIUM (FAILMODE_CHROMIUM)"
    return 0
  fi
  local name
  for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$name" >/dev/null 2>&1; then
      say "chromium found: $(command -v "$name")"
      return 0
    fi
  done
  if ! command -v apt-get >/dev/null 2>&1; then
    say "Chromium is missing: install it (or Google Chrome), or set FAILMODE_CHROMIUM to its binary"
    exit 1
  fi
  say "chromium is missing; installing Debian's chromium package"
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
  say "installed $(chromium --version 2>/dev/null | head -n1)"
}

for part in "${PARTS[@]}"; do
  case "$part" in
    redis) setup_redis ;;
    toxiproxy) setup_toxiproxy ;;
    node) setup_node ;;
    python) setup_python ;;
    go) setup_go ;;
    rust) setup_rust ;;
    java) setup_java ;;
    nginx) setup_nginx ;;
    hdrhistogram) setup_hdrhistogram ;;
    chromium) setup_chromium ;;
    *) say "unknown part '$part' (known: redis toxiproxy node python go rust java nginx hdrhistogram chromium)"; exit 64 ;;
  esac
done

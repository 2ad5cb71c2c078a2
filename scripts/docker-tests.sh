#!/usr/bin/env bash
# The tests that need a Docker daemon, #[ignore]d in `cargo test`: tests/docker.rs (a run with
# --infra docker, cargo feature `docker`) and tests/compose/'s `docker compose config` check.
# `just test` runs this after the suite. They run only where `docker info` answers within
# FAILMODE_DOCKER_TIMEOUT seconds (default 10); otherwise this says they were skipped and why,
# and exits 0: a skip is reported as a skip, never as a pass.
set -euo pipefail
cd "$(dirname "$0")/.."

WAIT="${FAILMODE_DOCKER_TIMEOUT:-10}"
TESTS="the Docker container tests (tests/docker.rs, tests/compose/'s docker compose config)"

reason=""
if ! command -v docker >/dev/null 2>&1; then
  reason="no docker command on PATH"
else
  errors=$(mktemp)
  trap 'rm -f "$errors"' EXIT
  status=0
  answer=$(timeout "$WAIT" docker info --format '{{.ServerVersion}}' 2>"$errors") || status=$?
  if [ "$status" -eq 124 ]; then
    reason="no answer within ${WAIT} s"
  elif [ "$status" -ne 0 ] || [ -z "$answer" ]; then
    # Its own words, on one line: "Cannot connect to the Docker daemon at unix://…".
    reason=$(grep -v '^[[:space:]]*$' "$errors" | head -n 1 || true)
    reason="${reason:-exit status $status and nothing said}"
  fi
fi

if [ -n "$reason" ]; then
  echo "skipped: ${TESTS} — no Docker daemon answers here (docker info: ${reason})"
  exit 0
fi

echo "Docker daemon ${answer} answers: running ${TESTS}"
cargo test -p failmode --features docker --test docker -- --ignored
cargo test -p failmode --test compose -- --ignored

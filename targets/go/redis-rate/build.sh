#!/usr/bin/env bash
# The go-redis-rate target's build step: .tools/bin/failmode-redis-rate (targets/go/build-module.sh).
set -euo pipefail
exec "$(dirname "$0")/../build-module.sh" redis-rate redis-rate

#!/usr/bin/env bash
# The traefik-ratelimit target's build step: .tools/bin/failmode-traefik-ratelimit
# (targets/go/build-module.sh). Traefik's middleware package imports half of Traefik (its
# tracing pulls in the static configuration, hence the ACME provider and lego's DNS
# providers): the first build on a
# machine downloads ~340 modules and compiles them, measured here at 15 min of CPU
# (about 8–10 min on 2 idle cores, 22 min beside another build) and 3 GB of memory, for a
# ~100 MB binary; later builds come from Go's build cache.
set -euo pipefail
exec "$(dirname "$0")/../build-module.sh" traefik-ratelimit traefik-ratelimit \
  "the first build on a machine takes minutes"

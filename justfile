# failmode — every developer and CI command. `just --list` shows them.

set shell := ["bash", "-euo", "pipefail", "-c"]

export PATH := justfile_directory() / ".tools/bin" + ":" + env_var('PATH')

# Show the recipes.
default:
    @just --list

# Install what the tests and runs need and is missing: redis-server, toxiproxy-server, the Node.js
# targets' packages (npm ci), the Python targets' virtualenv (.tools/python), the Go targets
# (.tools/bin), the Java target (.tools/java), Debian's nginx, and the tests' HdrHistogram reader and
# headless Chromium; idempotent.
setup:
    @scripts/setup.sh

# What every run needs, whatever its targets: redis-server and toxiproxy-server.
setup-core:
    @scripts/setup.sh redis toxiproxy

# Run a scenario end to end and print the comparison table: `just chaos slow-redis`.
# Extra flags go to `failmode run` (e.g. `just chaos redis-down --duration-scale 0.2`). Only the
# scenario's targets are built: each manifest's build step installs its own toolchain (npm ci,
# a virtualenv, a Go or Maven build) when a run includes it.
chaos NAME *ARGS: setup-core build
    target/release/failmode run {{NAME}} {{ARGS}}

# The deployment file `compose-chaos` attaches with: deploy/compose.toml (the reference, no
# profile) unless DEPLOY or `just deploy=…` names another, e.g. deploy/compose-node.toml for
# the containers of `docker compose --profile node up -d --build`.
deploy := env_var_or_default("DEPLOY", "deploy/compose.toml")

# Start the containers first with `docker compose [--profile P] up -d --build`; extra flags go
# to `failmode run`.
# Run a scenario against docker-compose.yml's containers: `just [deploy=deploy/compose-P.toml] compose-chaos NAME`.
compose-chaos NAME *ARGS:
    cargo build --release --quiet -p failmode
    target/release/failmode run {{NAME}} --no-build --attach {{deploy}} {{ARGS}}

# Run a scenario and check its gates: exit 1 if any target breaks one (`just gate slow-redis`).
gate NAME *ARGS: setup-core build
    target/release/failmode run {{NAME}} --gate {{ARGS}}

# The reference beside the Node.js, Python, Go and Java limiters people deploy and NGINX's
# store-less limit_req, through a slow, a hung, a stalled and a cut Redis; regenerates
# docs/peers.md from the run. Four targets at a time (six batches, about 22–25 minutes): eleven
# at once saturated 2 cores. Flags go to `failmode run`.
peers *ARGS: setup build
    target/release/failmode run peers --no-build --batch 4 {{ARGS}}
    target/release/failmode outcomes results/latest --out docs/peers.md --regenerate "just peers{{ if ARGS == "" { "" } else { " " + ARGS } }}"

# The same targets as `peers` through Redis's error replies (-OOM, -READONLY, -BUSY, -NOSCRIPT),
# four at a time (six batches, about 18 minutes); regenerates docs/peers-errors.md from the run.
peers-errors *ARGS: setup build
    target/release/failmode run peers-errors --no-build --batch 4 {{ARGS}}
    target/release/failmode outcomes results/latest --out docs/peers-errors.md --regenerate "just peers-errors{{ if ARGS == "" { "" } else { " " + ARGS } }}"

# The same targets as `peers` through a Sentinel failover (each target's Redis a primary, a
# replica and three sentinels; the primary killed), four at a time (six batches, about 7
# minutes); regenerates docs/peers-failover.md from the run.
peers-failover *ARGS: setup build
    target/release/failmode run peers-failover --no-build --batch 4 {{ARGS}}
    target/release/failmode outcomes results/latest --out docs/peers-failover.md --regenerate "just peers-failover{{ if ARGS == "" { "" } else { " " + ARGS } }}"

# List the scenarios and the targets.
list: build
    target/release/failmode list

# Release builds of the harness and the reference limiter (what `chaos` runs).
build:
    cargo build --release --quiet -p failmode -p failmode-reference

# The whole test suite: lints, unit, property and integration tests (real redis-server and
# Toxiproxy). The harness's end-to-end tests run the release reference and the scripted oracle
# target (targets/oracle), built first. Then the container tests where a Docker daemon answers
# (scripts/docker-tests.sh says when they're skipped).
# After `cargo test` it lists the runs a test repeated because the machine fell behind.
test: setup lint build
    cargo build --release --quiet -p failmode-oracle
    log=$(mktemp); status=0; FAILMODE_RUN_AGAIN_LOG="$log" cargo test --workspace || status=$?; if [ -s "$log" ]; then echo "Runs repeated because the machine fell behind (harness/tests/support/mod.rs):"; cat "$log"; fi; rm -f "$log"; exit $status
    scripts/docker-tests.sh

# The slow tier, which CI runs after `test`: docs/your-limiter.md's walkthrough end to end, then
# `peers-errors` and `peers-failover` on every peer target, scaled down (tests/peers_scenario.rs's
# ignored tests, about 11.5 minutes; `peers` itself runs in `test`). The walkthrough installs
# failmode and failmode-reference with `cargo install` (into .tools/install), then runs
# examples/checkout-api from a directory outside the repository with only those binaries, Redis
# and Toxiproxy, the checkout hidden (a mount namespace: needs root). The install builds in
# `target`, beside `just build`'s release build: after `just test` it reuses its dependencies
# (measured: only failmode itself compiled again), where a separate folder rebuilt them all.
test-slow: setup
    cargo install --quiet --locked --force --path harness --root .tools/install --target-dir target
    cargo install --quiet --locked --force --path targets/reference --root .tools/install --target-dir target
    cargo test -p failmode --test walkthrough -- --ignored
    cargo test -p failmode --test peers_scenario -- --ignored

# Formatting and clippy as CI runs them, clippy also with the `docker` feature (no daemon needed).
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy -p failmode --features docker --all-targets -- -D warnings

# Fuzz with many cases (`just test` runs 64 per property): the scenario, gates, manifest and
# deployment parsers on arbitrary and mutated files, and the reference's HTTP surface on a real
# redis-server. CASES per property (default 10000); about 2 minutes on 2 cores.
fuzz CASES="10000": setup-core
    FAILMODE_FUZZ_CASES={{CASES}} cargo test -p failmode --test fuzz
    FAILMODE_FUZZ_CASES={{CASES}} cargo test -p failmode-reference --test fuzz_http

# Benchmark the reference limiter (about 5 minutes): a decision's cost with Redis healthy and
# hung, what four instances admit of a caller above the limit (healthy, hung, the first second
# back), and decisions a second through one Redis beside the floor (EVALSHA from a plain
# client). Flags: --seconds N, --rate R, --throughput-rates 2500,5000, --step-seconds N,
# --exactness-only, --throughput-only. Results in docs/reference.md.
bench-reference *ARGS: setup
    cargo bench -p failmode-reference --bench reference -- {{ARGS}}

# Benchmark the load generator against oha at 100 to 40,000 req/s, three runs of each per rate
# (installs oha 1.16.0 into the git-ignored .tools/ if it is missing); with the default flags
# its table is written to docs/bench-loadgen.md and the highest rate held is recorded as this
# machine's capacity in ~/.cache/failmode/capacity.json (what a run is warned against). Flags:
# --secs N, --runs N, --rates 100,1000, --senders N (sender threads; default: the engine's
# choice), --keys N (acme's requests each draw one of N caller keys), --oha PATH.
bench-loadgen *ARGS:
    @test -x .tools/bin/oha || { echo "installing oha 1.16.0 into .tools/ (cargo install, a few minutes)"; cargo install oha --version 1.16.0 --locked --root .tools; }
    cargo bench -p failmode --bench loadgen -- {{ARGS}}

# The soak: 30 minutes at 5,000 req/s on the reference's four instances, a 30 s fault (slow,
# flapping, hung Redis in turn) in every minute (harness/benches/soak.toml), while a sampler
# reads the harness's and each instance's RSS and open fds every minute; exits 1 unless each
# stayed within 10 % of its first minute. SCALE shortens every minute (`just soak 0.1`: 3 min).
soak SCALE="1": setup-core build
    cargo bench -p failmode --bench soak -- --scale {{SCALE}}

# Run one reference instance by hand (flags as in `failmode-reference --help`).
reference *ARGS:
    cargo run --release -p failmode-reference -- {{ARGS}}

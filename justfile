# failmode — every developer and CI command. `just --list` shows them.

set shell := ["bash", "-euo", "pipefail", "-c"]

export PATH := justfile_directory() / ".tools/bin" + ":" + env_var('PATH')

# Show the recipes.
default:
    @just --list

# Install what the tests and runs need and is missing (redis-server); idempotent.
setup:
    @scripts/setup.sh

# The whole test suite: lints, unit, property and integration tests (real redis-server).
test: setup lint
    cargo test --workspace --all-targets

# Formatting and clippy, as CI runs them.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings

# Benchmark the reference limiter: healthy decision vs a no-limit route, and with Redis hung.
bench-reference *ARGS: setup
    cargo bench -p failmode-reference --bench reference -- {{ARGS}}

# Run one reference instance by hand (flags as in `failmode-reference --help`).
reference *ARGS:
    cargo run --release -p failmode-reference -- {{ARGS}}

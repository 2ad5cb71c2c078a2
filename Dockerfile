# failmode itself as a container image: the load worker of docs/distributed.md (a Kubernetes
# Indexed Job of `failmode run --attach … --worker K/N`). Build it from the repository root:
#   docker build -t failmode .
# It attaches to a deployment that already runs; it starts no Redis, Toxiproxy or limiter.

# The Rust the workspace is developed and tested with, as targets/reference/Dockerfile.
FROM rust:1.95.0-slim-bookworm AS builder
WORKDIR /src
# Cargo resolves the whole workspace before it builds one package: every member's manifest
# and sources must be here.
COPY Cargo.toml Cargo.lock ./
COPY harness/ harness/
COPY targets/ targets/
# The binary embeds the shipped scenarios and the reference's manifest (include_str!).
COPY scenarios/ scenarios/
RUN cargo build --release --locked -p failmode \
 && mkdir /manifests \
 && find targets -name target.toml -exec cp --parents {} /manifests/ \;

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --create-home --shell /usr/sbin/nologin failmode
COPY --from=builder /src/target/release/failmode /usr/local/bin/failmode
# Run in /failmode, failmode takes it for its checkout (a Cargo.toml whose [workspace] members
# include harness): there it reads scenarios/ and the target manifests (request path, caller
# header, metrics of each attached target), and writes results/.
WORKDIR /failmode
COPY Cargo.toml ./
COPY scenarios/ scenarios/
COPY --from=builder /manifests/targets/ targets/
RUN mkdir results && chown failmode results
USER failmode
ENV NO_COLOR=1
ENTRYPOINT ["/usr/local/bin/failmode"]

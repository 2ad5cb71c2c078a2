#!/usr/bin/env bash
# Makes the class-data-sharing archive (AppCDS) .tools/java/spring-cloud-gateway/app/app.jsa
# for the extracted Spring Boot jar beside it, with the `java` on PATH: a training run that
# starts the Spring context and exits (`-Dspring.context.exit=onRefresh`), no port, no Redis.
# Run from anywhere; the paths are the workspace-relative ones the manifest's start command
# names, and the run is made from the workspace root as failmode starts the instances.
# The archive is only good for the exact JVM that made it (with another, the JVM warns and
# starts without it), so it is made where it is used: by build.sh with the `java` the
# manifest runs, and by targets/java/spring-cloud-gateway/Dockerfile in its runtime stage.
# Usage: cds-archive.sh LOG (the training run's output, shown in part if it fails).
set -euo pipefail
log=$(realpath -m "${1:?usage: cds-archive.sh LOG}")
cd "$(dirname "$0")/../../.."

APP=.tools/java/spring-cloud-gateway/app
JAR=$APP/failmode-spring-cloud-gateway.jar
JSA=$APP/app.jsa
# The archive's class paths and GC must match the manifest's start command (target.toml).
TRAIN_FLAGS=(-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx64m -XX:MaxMetaspaceSize=96m)

rm -f "$JSA"
if ! env -i PATH="$PATH" \
    FAILMODE_BIND=127.0.0.1 FAILMODE_PORT=1 FAILMODE_REDIS_URL=redis://127.0.0.1:1 \
    FAILMODE_INSTANCE_ID=cds-training FAILMODE_INSTANCE_COUNT=1 FAILMODE_LIMIT=50 FAILMODE_WINDOW_MS=1000 \
    FAILMODE_CALLER_HEADER=x-caller SCG_DENY_EMPTY_KEY=true SCG_EMPTY_KEY_STATUS=BAD_REQUEST \
    LETTUCE_COMMAND_TIMEOUT_MS=20 LETTUCE_CONNECT_TIMEOUT_MS=1000 LETTUCE_DISCONNECTED_BEHAVIOR=REJECT_COMMANDS \
    FAILMODE_LOG_STACK_TRACES=false \
    java "${TRAIN_FLAGS[@]}" -XX:ArchiveClassesAtExit="$JSA" -Dspring.context.exit=onRefresh \
    -jar "$JAR" >"$log" 2>&1 || [ ! -s "$JSA" ]; then
  tail -n 20 "$log" >&2
  echo "cds-archive: the training run failed or wrote no archive (log: $log)" >&2
  exit 1
fi

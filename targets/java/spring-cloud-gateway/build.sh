#!/usr/bin/env bash
# The spring-cloud-gateway target's build step, from the workspace root. Builds, all in the
# git-ignored .tools folder, only when the sources, pom.xml, this script or the Java version
# changed since the last build (a digest stamped next to the jar, as the Go targets do):
#   1. `mvn package` with its own local repository (.tools/m2), output in .tools/java/…/maven;
#   2. the Spring Boot jar extracted (`-Djarmode=tools extract`) into
#      .tools/java/spring-cloud-gateway/app: the application jar plus lib/, what a CDS archive needs;
#   3. a class-data-sharing archive (AppCDS, app/app.jsa) from a training run that starts the
#      Spring context and exits (`-Dspring.context.exit=onRefresh`): no port, no Redis
#      (cds-archive.sh, which the Dockerfile's runtime stage runs too).
# The manifest runs `java` from PATH, so this uses the same one (the archive is only good
# for the exact JVM that made it; with another, the JVM warns and starts without it).
set -euo pipefail
cd "$(dirname "$0")/../../.."
say() { printf 'spring-cloud-gateway build: %s\n' "$*"; }

SRC=targets/java/spring-cloud-gateway
OUT=.tools/java/spring-cloud-gateway
APP=$OUT/app
JAR=$APP/failmode-spring-cloud-gateway.jar
JSA=$APP/app.jsa
STAMP=$JAR.sha256

JAVA=$(command -v java || true)
if [ -z "$JAVA" ]; then
  say "this target needs a Java 17 or later JDK with 'java' on PATH, which is not there (Debian: apt-get install default-jdk-headless)"
  exit 1
fi
JAVA_SPEC=$("$JAVA" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p')
if ! [[ "$JAVA_SPEC" =~ ^[0-9]+$ ]] || [ "$JAVA_SPEC" -lt 17 ]; then
  say "this target needs Java 17 or later; 'java' on PATH ($JAVA) is ${JAVA_SPEC:-of an unknown version}"
  exit 1
fi
JAVA_HOME_OF_PATH=$(dirname "$(dirname "$(readlink -f "$JAVA")")")
if [ ! -x "$JAVA_HOME_OF_PATH/bin/javac" ]; then
  say "'java' on PATH ($JAVA_HOME_OF_PATH) is a runtime without javac; this target needs a JDK (Debian: apt-get install default-jdk-headless)"
  exit 1
fi
if ! command -v mvn >/dev/null 2>&1; then
  say "this target needs Maven 3.6.3 or later ('mvn'), which is not installed (Debian: apt-get install maven; or scripts/setup.sh java)"
  exit 1
fi

java_version=$("$JAVA" -version 2>&1 | tr '\n' ' ')
digest=$({ echo "$java_version"; cd "$SRC" && find pom.xml build.sh cds-archive.sh src -type f -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -d' ' -f1)
if [ -f "$JAR" ] && [ -f "$JSA" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$digest" ]; then
  say "$JAR is current"
  exit 0
fi

say "mvn package $SRC/pom.xml (Java $JAVA_SPEC from $JAVA_HOME_OF_PATH, Maven repository .tools/m2, versions pinned in the pom)"
rm -f "$STAMP"
# Debian's Maven 3.8 prints bare colour codes even with -q -B: dropped, so that only
# warnings and errors are left.
JAVA_HOME=$JAVA_HOME_OF_PATH mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$PWD/.tools/m2" \
  -DskipTests -f "$SRC/pom.xml" package 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | { grep -v '^[[:space:]]*$' || true; }

say "extracting the Spring Boot jar into $APP"
rm -rf "$APP"
"$JAVA" -Djarmode=tools -jar "$OUT/maven/failmode-spring-cloud-gateway.jar" extract --destination "$APP" >/dev/null

say "making the class-data-sharing archive $JSA (a training run of the Spring context)"
"$SRC/cds-archive.sh" "$OUT/cds-training.log"

echo "$digest" >"$STAMP"
say "built $JAR and $JSA"

#!/usr/bin/env bash
# A real Confluent-compatible Schema Registry for development and the tests, without Docker: Apicurio Registry
# 2.4.2 (its Confluent API, /apis/ccompat/v7), packaged once with Maven from Maven Central jars and cached
# outside the repository, run as a plain `java -jar` on 127.0.0.1. Its storage is an H2 database file in the
# state directory: schemas and ids outlive a stop or a kill, as a production registry's do (reset empties it).
#
#   bash scripts/registry/registry.sh start|stop|kill|status|build
#
#   start   builds on first use (a few minutes; later starts take ~3 s), starts, waits until it answers
#   stop    SIGTERM to the pid in the pid file, SIGKILL after 10 s | kill: SIGKILL at once
#   reset   stop, then delete its stored schemas
#   status  exit 0 when it answers (started here or not), 3 when nothing answers
#
# Environment (defaults in brackets):
#   REGISTRY_PORT          HTTP port on 127.0.0.1 (below Linux's ephemeral range)         [28081]
#   REGISTRY_CACHE         the packaged registry                [~/.cache/kafka-exactly-once/registry/apicurio-2.4.2]
#   REGISTRY_STATE_DIR     log, pid file and the stored schemas (data/)                 [<repo>/.registry]
#   REGISTRY_MVN_SETTINGS  a Maven settings.xml to use instead of the generated Central-only one
# Needs bash, java 17+, mvn, unzip and curl. The registry's base URL for clients is printed by start:
# http://127.0.0.1:<port>/apis/ccompat/v7. Differences from Confluent's registry: docs/schema-registry.md.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PORT=${REGISTRY_PORT:-28081}
CACHE=${REGISTRY_CACHE:-$HOME/.cache/kafka-exactly-once/registry/apicurio-2.4.2}
STATE=${REGISTRY_STATE_DIR:-$ROOT/.registry}
BUILD=$CACHE/build
PID_FILE=$STATE/registry.pid
LOG=$STATE/registry.log
BASE=http://127.0.0.1:$PORT/apis/ccompat/v7
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java
START_TIMEOUT_S=90

say() { echo "registry: $*"; }
die() { echo "registry: $*" >&2; exit 1; }

runner_jar() {
  local jar
  for jar in "$BUILD"/target/*-runner.jar; do [ -f "$jar" ] && { echo "$jar"; return 0; }; done
  return 1
}

answers() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$BASE/subjects" 2>/dev/null)" = 200 ]
}

# The pid from the pid file, if that process is alive and is our registry.
our_pid() {
  local pid cmd
  [ -f "$PID_FILE" ] || return 1
  pid=$(<"$PID_FILE")
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  if [ -r "/proc/$pid/cmdline" ]; then
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline")
    [[ $cmd == *-runner.jar* ]] || return 1
  fi
  echo "$pid"
}

# Maven Central's URL, read from the super POM of the installed Maven, so that no file here names a registry.
central_url_in() {
  local jar url
  for jar in "$1"/lib/maven-model-builder*.jar "$1"/lib/*.jar; do
    [ -f "$jar" ] || continue
    url=$(unzip -p "$jar" org/apache/maven/model/pom-4.0.0.xml 2>/dev/null |
      sed -n '/<id>central<\/id>/,/<\/url>/s:.*<url>\(.*\)</url>.*:\1:p' | head -n 1)
    [ -n "$url" ] && { echo "$url"; return 0; }
  done
  return 1
}
central_url() {
  central_url_in "$(dirname "$(readlink -f "$(command -v mvn)")")/.." ||
    central_url_in "$(mvn -B -v 2>/dev/null | sed -n 's/^Maven home: //p')"
}

build() {
  local jar tmp version settings url
  if jar=$(runner_jar) && [ -f "$BUILD/pom.xml" ] && [ "$(<"$HERE/pom.xml")" = "$(<"$BUILD/pom.xml")" ]; then
    return 0
  fi
  command -v mvn >/dev/null || die "mvn is not on PATH"
  version=$(sed -n 's:.*<apicurio.version>\(.*\)</apicurio.version>.*:\1:p' "$HERE/pom.xml")
  [ -n "$version" ] || die "no <apicurio.version> in $HERE/pom.xml"
  say "building Apicurio Registry $version in $BUILD (first time only; takes a few minutes)"
  mkdir -p "$CACHE"
  tmp=$(mktemp -d "$CACHE/build.tmp.XXXXXX")
  mkdir -p "$tmp/src/main/resources" "$tmp/fetch"
  cp "$HERE/pom.xml" "$tmp/pom.xml"

  if [ -n "${REGISTRY_MVN_SETTINGS:-}" ]; then
    settings=$REGISTRY_MVN_SETTINGS
  else
    # NOTE: the registry's parent POM lists repositories that are unreachable here; mirror everything to Central.
    url=$(central_url) || die "cannot find Maven Central's URL in the installed Maven's super POM"
    settings=$tmp/settings.xml
    printf '<settings>\n  <mirrors>\n    <mirror>\n      <id>central-only</id>\n      <mirrorOf>*</mirrorOf>\n      <url>%s</url>\n    </mirror>\n  </mirrors>\n</settings>\n' \
      "$url" >"$settings"
  fi

  # The app jar's own application.properties, plus an index entry for the app jar: upstream builds it as the
  # root module, here it is a dependency, so Quarkus must be told to index it.
  if ! (cd "$tmp/fetch" && nice mvn -B -ntp -q -s "$settings" \
      org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
      -Dartifact="io.apicurio:apicurio-registry-app:$version" -DoutputDirectory="$tmp/fetch" >"$tmp/build.log" 2>&1); then
    tail -n 30 "$tmp/build.log" >&2
    die "could not fetch apicurio-registry-app $version (log: $tmp/build.log)"
  fi
  {
    unzip -p "$tmp/fetch/apicurio-registry-app-$version.jar" application.properties
    printf '\nquarkus.index-dependency.registryapp.group-id=io.apicurio\n'
    printf 'quarkus.index-dependency.registryapp.artifact-id=apicurio-registry-app\n'
  } >"$tmp/src/main/resources/application.properties"

  if ! (cd "$tmp" && nice mvn -B -ntp -q -s "$settings" package >>"$tmp/build.log" 2>&1); then
    tail -n 30 "$tmp/build.log" >&2
    die "build failed (log: $tmp/build.log)"
  fi
  rm -rf "$tmp/fetch" "$BUILD"
  mv "$tmp" "$BUILD"
  jar=$(runner_jar) || die "build produced no runner jar in $BUILD/target"
  say "built $jar"
}

start() {
  local jar pid deadline
  if answers; then
    say "already answering on $BASE"
    return 0
  fi
  if ! pid=$(our_pid); then
    build
    jar=$(runner_jar)
    mkdir -p "$STATE"
    # SIGHUP ignored so the registry outlives the shell that started it (the JVM keeps an ignored SIGHUP).
 (
      trap '' HUP
      export REGISTRY_DATASOURCE_URL="${REGISTRY_DATASOURCE_URL:-jdbc:h2:file:$STATE/data/registry_db;WRITE_DELAY=0}"
      exec "$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$PORT" -jar "$jar"
    ) </dev/null >"$LOG" 2>&1 &
    pid=$!
    echo "$pid" >"$PID_FILE"
  else
    say "pid $pid is already starting; waiting for it"
  fi
  deadline=$((SECONDS + START_TIMEOUT_S))
  while ((SECONDS < deadline)); do
    if answers; then
      say "ready on $BASE (pid $pid)"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      tail -n 40 "$LOG" >&2
      die "the registry exited during start-up (log: $LOG)"
    fi
    sleep 0.5
  done
  tail -n 40 "$LOG" >&2
  stop >/dev/null
  die "not ready after ${START_TIMEOUT_S}s; stopped it (log: $LOG)"
}

kill_now() {
  local pid
  if ! pid=$(our_pid); then
    say "not running (no live pid in $PID_FILE)"
    return 0
  fi
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$PID_FILE"
  say "killed (pid $pid)"
}

stop() {
  local pid i
  if ! pid=$(our_pid); then
    rm -f "$PID_FILE"
    say "not running (no live pid in $PID_FILE)"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 20; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    say "pid $pid did not stop within 10s; killed"
  fi
  rm -f "$PID_FILE"
  say "stopped (pid $pid)"
}

status() {
  local pid
  if pid=$(our_pid); then
    if answers; then say "running on $BASE (pid $pid)"; else say "pid $pid is alive but not answering on $BASE"; fi
    return 0
  fi
  if answers; then
    say "something not started by this script answers on $BASE"
    return 0
  fi
  say "not running on port $PORT"
  return 3
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  kill) kill_now ;;
  reset) stop; rm -rf "$STATE/data"; say "stored schemas deleted ($STATE/data)" ;;
  status) status ;;
  build) build; say "runner jar: $(runner_jar)" ;;
  *) echo "usage: bash $(basename "$0") start|stop|kill|reset|status|build" >&2; exit 2 ;;
esac

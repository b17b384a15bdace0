#!/usr/bin/env bash
# A real single-node Apache Kafka (KRaft, broker + controller) for development and CI, without Docker.
# The broker's jars come from Maven Central through Maven and are cached outside the repository.
#
#   bash scripts/kafka/kafka.sh start|stop|status|kill|restart|reset|fetch
#
# Environment (defaults in brackets):
#   KAFKA_VERSION          Kafka release, 4.x or 3.9.x                          [4.4.0]
#   KAFKA_PORT             client listener on 127.0.0.1                         [9092]
#   KAFKA_CONTROLLER_PORT  KRaft controller listener on 127.0.0.1               [9093]
#   KAFKA_HEAP             JVM heap (-Xms and -Xmx)                             [512m]
#   KAFKA_STATE_DIR        data, logs and pid file                              [<repo>/.kafka]
#   KAFKA_JARS_CACHE       where the Maven-resolved jars are kept between runs  [~/.cache/kafka-exactly-once/kafka]
#   KAFKA_START_TIMEOUT    seconds to wait for the broker to answer             [90]
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_HEAP="${KAFKA_HEAP:-512m}"
KAFKA_STATE_DIR="${KAFKA_STATE_DIR:-$ROOT/.kafka}"
KAFKA_JARS_CACHE="${KAFKA_JARS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kafka-exactly-once/kafka}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"

PID_FILE="$KAFKA_STATE_DIR/broker.pid"
JARS="$KAFKA_JARS_CACHE/$KAFKA_VERSION"

say() { printf 'kafka: %s\n' "$*"; }
die() { printf 'kafka: %s\n' "$*" >&2; exit 1; }

major_line() {
  case "$KAFKA_VERSION" in
    4.*) echo 4 ;;
    3.9.*) echo 3 ;;
    *) die "KAFKA_VERSION=$KAFKA_VERSION is not supported: use a 4.x release or 3.9.x" ;;
  esac
}

# The data folder of the version that is running (recorded at start), else of KAFKA_VERSION.
data_dir() {
  if [[ -f "$KAFKA_STATE_DIR/broker.version" ]]; then
    echo "$KAFKA_STATE_DIR/data-$(cat "$KAFKA_STATE_DIR/broker.version")"
  else
    echo "$KAFKA_STATE_DIR/data-$KAFKA_VERSION"
  fi
}

# Prints the recorded broker pid when that process is alive and is the broker this script started.
running_pid() {
  [[ -f "$PID_FILE" ]] || return 1
  local pid
  pid="$(cat "$PID_FILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "kafka.Kafka $KAFKA_STATE_DIR/" || return 1
  echo "$pid"
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

port_owner() {
  command -v ss >/dev/null 2>&1 || return 0
  ss -ltnpH "sport = :$1" 2>/dev/null | grep -o 'users:(("[^"]*",pid=[0-9]*' | head -1 |
    sed -E 's/users:\(\("([^"]*)",pid=([0-9]*)/\1 (pid \2)/' || true
}

probe() { node "$HERE/probe.js" "127.0.0.1:$KAFKA_PORT" "${1:-2000}"; }

require_java() {
  command -v java >/dev/null 2>&1 || die "java not found: install a JDK 17 or newer (Debian: apt-get install openjdk-17-jdk-headless) or use docker compose"
  local v
  v="$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')"
  [[ -n "$v" && "${v%%.*}" -ge 17 ]] || die "java $v found, but Kafka $KAFKA_VERSION needs Java 17 or newer: set JAVA_HOME/PATH to a JDK 17+"
}

require_node() {
  command -v node >/dev/null 2>&1 || die "node not found: install Node.js 20 or newer"
}

fetch() {
  local line
  line="$(major_line)"
  if [[ -f "$JARS/.complete" ]]; then return 0; fi
  command -v mvn >/dev/null 2>&1 || die "mvn not found: install Apache Maven (Debian: apt-get install maven), needed once to fetch Kafka $KAFKA_VERSION into $KAFKA_JARS_CACHE"
  say "fetching org.apache.kafka:kafka_2.13:$KAFKA_VERSION and its runtime dependencies with Maven into $JARS"
  mkdir -p "$KAFKA_JARS_CACHE"
  local tmp="$JARS.tmp.$$" log="$KAFKA_JARS_CACHE/fetch-$KAFKA_VERSION.log"
  rm -rf "$tmp"
  if ! mvn -B -q -f "$HERE/pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp" \
      -Dkafka.version="$KAFKA_VERSION" -Dkafka.line="$line" >"$log" 2>&1; then
    rm -rf "$tmp"
    die "Maven could not fetch kafka_2.13:$KAFKA_VERSION from Maven Central (is the version right, is the network up?); see $log"
  fi
  ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || die "Maven finished but no kafka_2.13 jar is in $tmp; see $log"
  touch "$tmp/.complete"
  rm -rf "$JARS"
  mv "$tmp" "$JARS"
}

write_config() {
  local data="$1"
  mkdir -p "$data/logs"
  cat >"$data/server.properties" <<EOF
# Written by scripts/kafka/kafka.sh on every start: edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$data/kraft
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
group.initial.rebalance.delay.ms=0
EOF
  if [[ "$(major_line)" == 4 ]]; then
    cat >"$data/log4j2.properties" <<EOF
status = warn
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = $data/logs/server.log
appender.file.filePattern = $data/logs/server.log.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 50MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 3
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
EOF
  else
    cat >"$data/log4j.properties" <<EOF
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File=$data/logs/server.log
log4j.appender.file.MaxFileSize=50MB
log4j.appender.file.MaxBackupIndex=3
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
  fi
}

log_options() {
  local data="$1"
  if [[ "$(major_line)" == 4 ]]; then
    echo "-Dlog4j2.configurationFile=$data/log4j2.properties"
  else
    echo "-Dlog4j.configuration=file:$data/log4j.properties"
  fi
}

format_storage() {
  local data="$1"
  [[ -f "$data/kraft/meta.properties" ]] && return 0
  local cluster_id
  # A base64url id may start with "-", which the storage tool would take for an option: begin with a letter.
  cluster_id="k$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' | cut -c2-)"
  say "formatting KRaft storage in $data/kraft (cluster $cluster_id)"
  # shellcheck disable=SC2046
  if ! java $(log_options "$data") -cp "$JARS/*" kafka.tools.StorageTool format \
      -t "$cluster_id" -c "$data/server.properties" --ignore-formatted >"$data/logs/format.log" 2>&1; then
    die "formatting KRaft storage failed; see $data/logs/format.log"
  fi
}

start() {
  local pid
  if pid="$(running_pid)"; then
    local running_version
    running_version="$(cat "$KAFKA_STATE_DIR/broker.version")"
    say "already running (pid $pid, Kafka $running_version, 127.0.0.1:$KAFKA_PORT)"
    [[ "$running_version" == "$KAFKA_VERSION" ]] || say "note: KAFKA_VERSION=$KAFKA_VERSION was asked for; run kafka:stop first to switch"
    return 0
  fi
  major_line >/dev/null
  require_java
  require_node
  for port in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    if port_open "$port"; then
      local owner
      owner="$(port_owner "$port")"
      die "port $port on 127.0.0.1 is already in use${owner:+ by $owner}: stop that process, or set KAFKA_PORT / KAFKA_CONTROLLER_PORT"
    fi
  done
  fetch
  mkdir -p "$KAFKA_STATE_DIR"
  local data="$KAFKA_STATE_DIR/data-$KAFKA_VERSION"
  write_config "$data"
  format_storage "$data"
  say "starting Kafka $KAFKA_VERSION on 127.0.0.1:$KAFKA_PORT (controller 127.0.0.1:$KAFKA_CONTROLLER_PORT, heap $KAFKA_HEAP, log $data/logs/server.log)"
  # setsid: the broker outlives the shell, npm or jest process that started it; it is stopped by its pid file.
  # shellcheck disable=SC2046
  setsid java -Xms"$KAFKA_HEAP" -Xmx"$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -Djava.awt.headless=true -Dkafka.logs.dir="$data/logs" $(log_options "$data") \
    -cp "$JARS/*" kafka.Kafka "$data/server.properties" \
    >"$data/logs/console.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$PID_FILE"
  echo "$KAFKA_VERSION" >"$KAFKA_STATE_DIR/broker.version"
  local deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  until probe 1000 >/dev/null 2>&1; do
    if ! kill -0 "$pid" 2>/dev/null; then
      rm -f "$PID_FILE"
      die "Kafka exited during start-up; see $data/logs/server.log and $data/logs/console.log ($(tail -n 1 "$data/logs/console.log" 2>/dev/null || true))"
    fi
    if ((SECONDS >= deadline)); then
      die "Kafka (pid $pid) did not answer a metadata request within ${KAFKA_START_TIMEOUT}s; see $data/logs/server.log"
    fi
    sleep 0.5
  done
  say "ready: $(probe 2000) (pid $pid)"
}

stop_broker() {
  local signal="$1" pid
  if ! pid="$(running_pid)"; then
    rm -f "$PID_FILE"
    say "not running"
    return 0
  fi
  if [[ "$signal" == KILL ]]; then
    kill -KILL "$pid"
    say "killed pid $pid with SIGKILL (data kept in $(data_dir))"
  else
    kill -TERM "$pid"
    local deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      say "pid $pid did not stop within 60s; sending SIGKILL"
      kill -KILL "$pid"
    fi
    say "stopped pid $pid (data kept in $(data_dir))"
  fi
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$PID_FILE"
}

status() {
  local pid
  if pid="$(running_pid)"; then
    local answer owner
    # The broker of the pid file must be the one listening on KAFKA_PORT, not merely some broker.
    owner="$(port_owner "$KAFKA_PORT")"
    if [[ -n "$owner" && "$owner" != *"(pid $pid)" ]]; then
      say "pid $pid is alive, but 127.0.0.1:$KAFKA_PORT belongs to $owner: another broker (check KAFKA_PORT and KAFKA_STATE_DIR)"
      return 2
    fi
    if answer="$(probe 2000 2>&1)"; then
      say "running: pid $pid, Kafka $(cat "$KAFKA_STATE_DIR/broker.version"), 127.0.0.1:$KAFKA_PORT, $answer, data $(data_dir)"
      return 0
    fi
    say "pid $pid is alive but 127.0.0.1:$KAFKA_PORT does not answer: $answer (log: $(data_dir)/logs/server.log)"
    return 2
  fi
  if port_open "$KAFKA_PORT"; then
    say "not started by this script, but something listens on 127.0.0.1:$KAFKA_PORT${KAFKA_PORT:+ ($(probe 2000 2>&1 || true))}"
    return 3
  fi
  say "not running"
  return 3
}

case "${1:-}" in
  fetch) major_line >/dev/null; fetch; say "jars in $JARS" ;;
  start) start ;;
  stop) stop_broker TERM ;;
  kill) stop_broker KILL ;;
  restart) stop_broker TERM; start ;;
  status) status ;;
  reset)
    stop_broker TERM
    rm -rf "$KAFKA_STATE_DIR/data-$KAFKA_VERSION" "$KAFKA_STATE_DIR/broker.version"
    say "removed the data of Kafka $KAFKA_VERSION"
    ;;
  *) die "usage: kafka.sh start|stop|status|kill|restart|reset|fetch" ;;
esac

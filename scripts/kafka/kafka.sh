#!/usr/bin/env bash
# A real Apache Kafka (KRaft) for development and CI, without Docker: one node (broker + controller) by default,
# or a three-node cluster with --nodes 3. The broker's jars come from Maven Central through Maven and are cached
# outside the repository.
#
#   bash scripts/kafka/kafka.sh start|stop|status|kill|restart|reset|fetch
#   bash scripts/kafka/kafka.sh --nodes 3 start|stop|status|kill|restart|reset|fetch
#   bash scripts/kafka/kafka.sh --nodes 3 kill-node|stop-node|start-node|restart-node N
#   bash scripts/kafka/kafka.sh --nodes 3 rolling-restart
#
# Environment (defaults in brackets):
#   KAFKA_NODES            1: single node, 3: three-node cluster (--nodes N anywhere on the line wins) [1]
#   KAFKA_VERSION          Kafka release, 4.x or 3.9.x                          [4.4.0]
#   KAFKA_PORT             client listener on 127.0.0.1                         [9092]
#   KAFKA_CONTROLLER_PORT  KRaft controller listener on 127.0.0.1               [9093]
#   KAFKA_PROXIED_PORT     a second client listener (PROXIED) on 127.0.0.1, advertised as 127.0.0.1:
#                          KAFKA_PROXY_PORT: clients that bootstrap through a TCP proxy on that port stay on
#                          it for every request (the verifier's network-kafka faults); unused otherwise [9094]
#   KAFKA_PROXY_PORT       the port the PROXIED listener is advertised on        [9095]
#   KAFKA_SCRAM_PORT       a SASL_PLAINTEXT listener (SASL_SCRAM) on 127.0.0.1 with SCRAM-SHA-256,
#                          SCRAM-SHA-512 and PLAIN, for clients that authenticate                    [9096]
#   KAFKA_SCRAM_USER       the user: written into the storage for SCRAM, into the listener's config for PLAIN [kafka-eo]
#   KAFKA_SCRAM_PASSWORD   its password                                                   [kafka-eo-secret]
#                          (users are written when the storage is formatted: after changing them, reset)
#   KAFKA_TLS_PORT         a TLS listener (TLS) on 127.0.0.1, its certificate signed by a local CA that is
#                          made once with openssl: clients trust <state>/tls/ca.pem                 [9097]
#   KAFKA_HEAP             JVM heap (-Xms and -Xmx), per node                   [512m; 384m with --nodes 3]
#   KAFKA_STATE_DIR        data, logs and pid file                              [<repo>/.kafka]
#   KAFKA_JARS_CACHE       where the Maven-resolved jars are kept between runs  [~/.cache/kafka-exactly-once/kafka]
#   KAFKA_START_TIMEOUT    seconds to wait for the broker (a cluster: each wait) to answer [90]
#
# Cluster mode (--nodes 3 or KAFKA_NODES=3): three KRaft nodes on 127.0.0.1, each broker and controller (a
# three-voter quorum, node ids 1..3), one cluster id formatted into all three; default.replication.factor=3,
# min.insync.replicas=2, offsets and transaction-state topics with replication factor 3 (min ISR 2). Its ports
# and state never collide with the single node's (KAFKA_PORT, KAFKA_CONTROLLER_PORT and KAFKA_STATE_DIR are not
# used). Node N (1..3) listens on KAFKA_CLUSTER_PORT_BASE+N-1 (advertised as 127.0.0.1:<that port>), its
# controller on KAFKA_CLUSTER_CONTROLLER_PORT_BASE+N-1; pid file <state>/node-N/broker.pid, log
# <state>/node-N/logs/server.log, data <state>/node-N/data-<version>.
#   KAFKA_CLUSTER_PORT_BASE             client port of node 1                  [9192: nodes on 9192, 9193, 9194]
#   KAFKA_CLUSTER_CONTROLLER_PORT_BASE  controller port of node 1              [9195: 9195, 9196, 9197]
#   KAFKA_CLUSTER_STATE_DIR             the cluster's data, logs and pid files [<repo>/.kafka-cluster]
# Cluster commands:
#   start            starts the nodes that are not running; waits until each answers and lists 3 live brokers
#   stop | kill      SIGTERM to every node at once and waits (60s, then SIGKILL) | SIGKILL to every node; data kept
#   status           per node: pid, port, up or down; exit 0 only when all three answer
#   restart | reset  stop then start | stop and delete the cluster's data of KAFKA_VERSION
#   kill-node N      SIGKILL to node N (by its pid file), waits until the process is gone
#   stop-node N      SIGTERM to node N, waits until it has exited (60s, then SIGKILL)
#   start-node N     starts node N with its existing data, waits until it answers and is a live broker again
#   restart-node N   stop-node N then start-node N
#   rolling-restart  needs all nodes up; for N = 1, 2, 3: stop-node N, start-node N, then waits until no
#                    partition is under-replicated before the next node
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"

say() { printf 'kafka: %s\n' "$*"; }
die() { printf 'kafka: %s\n' "$*" >&2; exit 1; }

# --nodes N (or --nodes=N) may stand anywhere on the command line; it wins over KAFKA_NODES.
KAFKA_NODES="${KAFKA_NODES:-1}"
ARGS=()
while (($#)); do
  case "$1" in
    --nodes) (($# >= 2)) || die "--nodes needs a value: --nodes 3"; KAFKA_NODES="$2"; shift 2 ;;
    --nodes=*) KAFKA_NODES="${1#--nodes=}"; shift ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
set -- "${ARGS[@]+"${ARGS[@]}"}"
case "$KAFKA_NODES" in
  1 | 3) ;;
  *) die "--nodes/KAFKA_NODES=$KAFKA_NODES is not supported: use 1 (single node) or 3 (three-node cluster)" ;;
esac

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_PORT="${KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_PROXIED_PORT="${KAFKA_PROXIED_PORT:-9094}"
KAFKA_PROXY_PORT="${KAFKA_PROXY_PORT:-9095}"
KAFKA_SCRAM_PORT="${KAFKA_SCRAM_PORT:-9096}"
KAFKA_SCRAM_USER="${KAFKA_SCRAM_USER:-kafka-eo}"
KAFKA_SCRAM_PASSWORD="${KAFKA_SCRAM_PASSWORD:-kafka-eo-secret}"
KAFKA_TLS_PORT="${KAFKA_TLS_PORT:-9097}"
if [[ "$KAFKA_NODES" == 1 ]]; then KAFKA_HEAP="${KAFKA_HEAP:-512m}"; else KAFKA_HEAP="${KAFKA_HEAP:-384m}"; fi
KAFKA_STATE_DIR="${KAFKA_STATE_DIR:-$ROOT/.kafka}"
KAFKA_JARS_CACHE="${KAFKA_JARS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kafka-exactly-once/kafka}"
KAFKA_START_TIMEOUT="${KAFKA_START_TIMEOUT:-90}"

PID_FILE="$KAFKA_STATE_DIR/broker.pid"
JARS="$KAFKA_JARS_CACHE/$KAFKA_VERSION"

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

# The TLS listener's certificate, made once per state folder: a local CA and a broker certificate for
# 127.0.0.1 and localhost that it signs (PEM; Kafka reads a PEM keystore of key and chain, KIP-651).
ensure_tls() {
  local dir="$KAFKA_STATE_DIR/tls"
  [[ -f "$dir/broker.pem" && -f "$dir/ca.pem" ]] && return 0
  command -v openssl >/dev/null 2>&1 || die "openssl not found: needed once to make the TLS listener's certificate (Debian: apt-get install openssl)"
  mkdir -p "$dir"
  local log="$dir/openssl.log"
  if ! {
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=kafka-exactly-once local CA" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      -keyout "$dir/ca.key" -out "$dir/ca.pem" &&
      openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$dir/broker.key" -out "$dir/broker.csr" &&
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$dir/broker.ext" &&
      openssl x509 -req -in "$dir/broker.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial -days 3650 \
        -extfile "$dir/broker.ext" -out "$dir/broker.crt" &&
      cat "$dir/broker.key" "$dir/broker.crt" "$dir/ca.pem" >"$dir/broker.pem"
  } >"$log" 2>&1; then
    rm -f "$dir/broker.pem"
    die "making the TLS listener's certificate failed; see $log"
  fi
}

write_config() {
  local data="$1"
  mkdir -p "$data/logs"
  cat >"$data/server.properties" <<EOF
# Written by scripts/kafka/kafka.sh on every start: edit the script, not this file.
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT,PROXIED://127.0.0.1:$KAFKA_PROXIED_PORT,SASL_SCRAM://127.0.0.1:$KAFKA_SCRAM_PORT,TLS://127.0.0.1:$KAFKA_TLS_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,PROXIED://127.0.0.1:$KAFKA_PROXY_PORT,SASL_SCRAM://127.0.0.1:$KAFKA_SCRAM_PORT,TLS://127.0.0.1:$KAFKA_TLS_PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,PROXIED:PLAINTEXT,SASL_SCRAM:SASL_PLAINTEXT,TLS:SSL
listener.name.tls.ssl.keystore.type=PEM
listener.name.tls.ssl.keystore.location=$KAFKA_STATE_DIR/tls/broker.pem
listener.name.tls.ssl.client.auth=none
listener.name.sasl_scram.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.sasl_scram.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_scram.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_scram.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_$KAFKA_SCRAM_USER="$KAFKA_SCRAM_PASSWORD";
log.dirs=$data/kraft
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
group.initial.rebalance.delay.ms=0
# Kafka 4's consumer groups (KIP-848, consumer.groupProtocol 'consumer'): a member that died is noticed after 10 s
# and assignments move at 2 s heartbeats, as the classic groups of the suites do (the broker's defaults, 45 s and
# 5 s, are also its lower bounds; docs/drivers.md).
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=1000
group.consumer.heartbeat.interval.ms=2000
EOF
  write_log_config "$data" "$data/logs"
}

# Logging configuration in the folder $1 (log4j2 for Kafka 4, log4j for 3.9) that writes into the folder $2.
write_log_config() {
  local data="$1" logs="$2"
  if [[ "$(major_line)" == 4 ]]; then
    cat >"$data/log4j2.properties" <<EOF
status = warn
appender.file.type = RollingFile
appender.file.name = FILE
appender.file.fileName = $logs/server.log
appender.file.filePattern = $logs/server.log.%i
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
log4j.appender.file.File=$logs/server.log
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
  # The SCRAM listener's user, for both mechanisms (KIP-900: SCRAM credentials written with the storage).
  local user="name=$KAFKA_SCRAM_USER,password=$KAFKA_SCRAM_PASSWORD"
  # shellcheck disable=SC2046
  if ! java $(log_options "$data") -cp "$JARS/*" kafka.tools.StorageTool format \
      -t "$cluster_id" -c "$data/server.properties" --ignore-formatted \
      --add-scram "SCRAM-SHA-256=[$user]" --add-scram "SCRAM-SHA-512=[$user]" >"$data/logs/format.log" 2>&1; then
    die "formatting KRaft storage failed; see $data/logs/format.log"
  fi
  echo "$KAFKA_SCRAM_USER" >"$data/scram-user"
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
  for port in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$KAFKA_PROXIED_PORT" "$KAFKA_SCRAM_PORT" "$KAFKA_TLS_PORT"; do
    if port_open "$port"; then
      local owner
      owner="$(port_owner "$port")"
      die "port $port on 127.0.0.1 is already in use${owner:+ by $owner}: stop that process, or set KAFKA_PORT / KAFKA_CONTROLLER_PORT / KAFKA_PROXIED_PORT / KAFKA_SCRAM_PORT / KAFKA_TLS_PORT"
    fi
  done
  fetch
  mkdir -p "$KAFKA_STATE_DIR"
  local data="$KAFKA_STATE_DIR/data-$KAFKA_VERSION"
  ensure_tls
  write_config "$data"
  format_storage "$data"
  [[ -f "$data/scram-user" ]] || say "note: $data was formatted without SCRAM users; the SASL_SCRAM listener on $KAFKA_SCRAM_PORT refuses every login until kafka:reset"
  say "starting Kafka $KAFKA_VERSION on 127.0.0.1:$KAFKA_PORT (SCRAM 127.0.0.1:$KAFKA_SCRAM_PORT, controller 127.0.0.1:$KAFKA_CONTROLLER_PORT, heap $KAFKA_HEAP, log $data/logs/server.log)"
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

# ---------------------------------------------------------------------------------------------------------------
# Cluster mode (--nodes 3): three broker+controller nodes, one pid file, log and data folder per node.

CLUSTER_NODES=3
KAFKA_CLUSTER_PORT_BASE="${KAFKA_CLUSTER_PORT_BASE:-9192}"
KAFKA_CLUSTER_CONTROLLER_PORT_BASE="${KAFKA_CLUSTER_CONTROLLER_PORT_BASE:-9195}"
KAFKA_CLUSTER_STATE_DIR="${KAFKA_CLUSTER_STATE_DIR:-$ROOT/.kafka-cluster}"

node_dir() { echo "$KAFKA_CLUSTER_STATE_DIR/node-$1"; }
node_port() { echo $((KAFKA_CLUSTER_PORT_BASE + $1 - 1)); }
node_controller_port() { echo $((KAFKA_CLUSTER_CONTROLLER_PORT_BASE + $1 - 1)); }
node_pid_file() { echo "$(node_dir "$1")/broker.pid"; }

# The version the cluster runs (recorded at start), else KAFKA_VERSION.
cluster_version() {
  if [[ -f "$KAFKA_CLUSTER_STATE_DIR/cluster.version" ]]; then cat "$KAFKA_CLUSTER_STATE_DIR/cluster.version"; else echo "$KAFKA_VERSION"; fi
}
node_data() { echo "$(node_dir "$1")/data-${2:-$(cluster_version)}"; }

# Alive and not a zombie waiting for its reaper.
pid_alive() {
  kill -0 "$1" 2>/dev/null || return 1
  [[ "$(sed -E 's/^[0-9]+ \(.*\) (.).*/\1/' "/proc/$1/stat" 2>/dev/null)" != Z ]]
}

# Prints the recorded pid of node $1 when that process is alive and is the kafka.Kafka of this node's folder.
node_running_pid() {
  local file pid
  file="$(node_pid_file "$1")"
  [[ -f "$file" ]] || return 1
  pid="$(cat "$file")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  [[ -r "/proc/$pid/cmdline" ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "kafka.Kafka $(node_dir "$1")/" || return 1
  pid_alive "$pid" || return 1
  echo "$pid"
}

any_node_running() {
  local i
  for ((i = 1; i <= CLUSTER_NODES; i++)); do node_running_pid "$i" >/dev/null && return 0; done
  return 1
}

node_probe() { node "$HERE/probe.js" "127.0.0.1:$(node_port "$1")" "${2:-2000}" "${@:3}"; }

check_node_number() {
  [[ "${1:-}" =~ ^[1-9][0-9]*$ ]] && (($1 <= CLUSTER_NODES)) || die "name a node: 1..$CLUSTER_NODES (e.g. kafka.sh --nodes 3 ${2:-start-node} 2)"
}

check_cluster_ports() {
  local c=$KAFKA_CLUSTER_PORT_BASE k=$KAFKA_CLUSTER_CONTROLLER_PORT_BASE n=$CLUSTER_NODES
  [[ "$c" =~ ^[0-9]+$ && "$k" =~ ^[0-9]+$ ]] || die "KAFKA_CLUSTER_PORT_BASE and KAFKA_CLUSTER_CONTROLLER_PORT_BASE must be port numbers"
  ((c + n <= k || k + n <= c)) || die "client ports $c..$((c + n - 1)) and controller ports $k..$((k + n - 1)) overlap: set KAFKA_CLUSTER_PORT_BASE / KAFKA_CLUSTER_CONTROLLER_PORT_BASE apart"
}

cluster_voters() {
  local i voters=""
  for ((i = 1; i <= CLUSTER_NODES; i++)); do voters+="${voters:+,}$i@127.0.0.1:$(node_controller_port "$i")"; done
  echo "$voters"
}

write_node_config() {
  local i="$1" data port cport
  data="$(node_data "$i" "$KAFKA_VERSION")" port="$(node_port "$i")" cport="$(node_controller_port "$i")"
  mkdir -p "$data" "$(node_dir "$i")/logs"
  cat >"$data/server.properties" <<EOF
# Written by scripts/kafka/kafka.sh (--nodes $CLUSTER_NODES) on every start: edit the script, not this file.
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$(cluster_voters)
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$data/kraft
num.partitions=1
default.replication.factor=$CLUSTER_NODES
min.insync.replicas=2
auto.create.topics.enable=false
offsets.topic.replication.factor=$CLUSTER_NODES
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$CLUSTER_NODES
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=10
group.initial.rebalance.delay.ms=0
# Kafka 4's consumer groups (KIP-848, consumer.groupProtocol 'consumer'): a member that died is noticed after 10 s
# and assignments move at 2 s heartbeats, as the classic groups of the suites do (the broker's defaults, 45 s and
# 5 s, are also its lower bounds; docs/drivers.md).
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=1000
group.consumer.heartbeat.interval.ms=2000
EOF
  write_log_config "$data" "$(node_dir "$i")/logs"
}

# One cluster id per version, kept in the state folder; every node's storage is formatted with it, once.
cluster_id() {
  local file="$KAFKA_CLUSTER_STATE_DIR/cluster-id-$KAFKA_VERSION" i meta
  if [[ ! -s "$file" ]]; then
    for ((i = 1; i <= CLUSTER_NODES; i++)); do
      meta="$(node_data "$i" "$KAFKA_VERSION")/kraft/meta.properties"
      if [[ -f "$meta" ]]; then sed -n 's/^cluster.id=//p' "$meta" >"$file"; break; fi
    done
  fi
  if [[ ! -s "$file" ]]; then
    # A base64url id may start with "-", which the storage tool would take for an option: begin with a letter.
    echo "k$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=' | cut -c2-)" >"$file"
  fi
  cat "$file"
}

format_node() {
  local i="$1" data id
  data="$(node_data "$i" "$KAFKA_VERSION")"
  [[ -f "$data/kraft/meta.properties" ]] && return 0
  id="$(cluster_id)"
  say "node $i: formatting KRaft storage in $data/kraft (cluster $id, voters $(cluster_voters))"
  # shellcheck disable=SC2046
  if ! java $(log_options "$data") -cp "$JARS/*" kafka.tools.StorageTool format \
      -t "$id" -c "$data/server.properties" --ignore-formatted >"$(node_dir "$i")/logs/format.log" 2>&1; then
    die "node $i: formatting KRaft storage failed; see $(node_dir "$i")/logs/format.log"
  fi
}

# Checks, fetches and picks the version before nodes start: nodes that run decide it (one version per cluster).
prepare_cluster_start() {
  check_cluster_ports
  if any_node_running && [[ -f "$KAFKA_CLUSTER_STATE_DIR/cluster.version" ]]; then
    local running_version
    running_version="$(cat "$KAFKA_CLUSTER_STATE_DIR/cluster.version")"
    if [[ "$running_version" != "$KAFKA_VERSION" ]]; then
      say "note: KAFKA_VERSION=$KAFKA_VERSION was asked for, but the running nodes are Kafka $running_version: starting $running_version (stop the cluster first to switch)"
      KAFKA_VERSION="$running_version"
      JARS="$KAFKA_JARS_CACHE/$KAFKA_VERSION"
    fi
  fi
  major_line >/dev/null
  require_java
  require_node
  fetch
  mkdir -p "$KAFKA_CLUSTER_STATE_DIR"
}

# Starts node $1 (not running) in the background and records its pid; does not wait.
launch_node() {
  local i="$1" data logs port pid
  data="$(node_data "$i" "$KAFKA_VERSION")" logs="$(node_dir "$i")/logs" port="$(node_port "$i")"
  for p in "$port" "$(node_controller_port "$i")"; do
    if port_open "$p"; then
      local owner
      owner="$(port_owner "$p")"
      die "node $i: port $p on 127.0.0.1 is already in use${owner:+ by $owner}: stop that process, or set KAFKA_CLUSTER_PORT_BASE / KAFKA_CLUSTER_CONTROLLER_PORT_BASE"
    fi
  done
  write_node_config "$i"
  format_node "$i"
  say "node $i: starting Kafka $KAFKA_VERSION on 127.0.0.1:$port (controller 127.0.0.1:$(node_controller_port "$i"), heap $KAFKA_HEAP, log $logs/server.log)"
  # setsid: the node outlives the shell that started it; it is stopped by its pid file.
  # shellcheck disable=SC2046
  setsid java -Xms"$KAFKA_HEAP" -Xmx"$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -Djava.awt.headless=true -Dkafka.logs.dir="$logs" $(log_options "$data") \
    -cp "$JARS/*" kafka.Kafka "$data/server.properties" \
    >"$logs/console.log" 2>&1 </dev/null &
  pid=$!
  echo "$pid" >"$(node_pid_file "$i")"
  echo "$KAFKA_VERSION" >"$KAFKA_CLUSTER_STATE_DIR/cluster.version"
}

# Waits until node $1 answers a metadata request that passes the probe options $3...; $2 is the deadline.
wait_node() {
  local i="$1" deadline="$2" pid answer logs
  shift 2
  logs="$(node_dir "$i")/logs"
  until answer="$(node_probe "$i" 1000 "$@" 2>&1)"; do
    if ! pid="$(node_running_pid "$i")"; then
      rm -f "$(node_pid_file "$i")"
      die "node $i exited during start-up; see $logs/server.log and $logs/console.log ($(tail -n 1 "$logs/console.log" 2>/dev/null || true))"
    fi
    if ((SECONDS >= deadline)); then
      die "node $i (pid $pid) did not pass within ${KAFKA_START_TIMEOUT}s: $answer; see $logs/server.log"
    fi
    sleep 0.5
  done
  echo "$answer"
}

cluster_start() {
  local i pid began=$SECONDS deadline answer
  prepare_cluster_start
  for ((i = 1; i <= CLUSTER_NODES; i++)); do
    if pid="$(node_running_pid "$i")"; then
      say "node $i: already running (pid $pid, 127.0.0.1:$(node_port "$i"))"
    else
      rm -f "$(node_pid_file "$i")"
      launch_node "$i"
    fi
  done
  deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  for ((i = 1; i <= CLUSTER_NODES; i++)); do
    answer="$(wait_node "$i" "$deadline" --min-brokers="$CLUSTER_NODES" --has-broker="$i")"
    say "node $i: ready: $answer (pid $(node_running_pid "$i"))"
  done
  say "cluster of $CLUSTER_NODES nodes ready in $((SECONDS - began))s: bootstrap servers $(bootstrap_servers)"
}

bootstrap_servers() {
  local i list=""
  for ((i = 1; i <= CLUSTER_NODES; i++)); do list+="${list:+,}127.0.0.1:$(node_port "$i")"; done
  echo "$list"
}

# Sends $1 (TERM or KILL) to the nodes $2...; waits until they are gone (TERM: 60s, then SIGKILL).
signal_nodes() {
  local signal="$1" i pid
  shift
  local -a pids=()
  for i in "$@"; do
    if pid="$(node_running_pid "$i")"; then
      pids[$i]="$pid"
      kill "-$signal" "$pid"
    else
      rm -f "$(node_pid_file "$i")"
      say "node $i: not running"
    fi
  done
  local deadline=$((SECONDS + 60))
  for i in "${!pids[@]}"; do
    pid="${pids[$i]}"
    if [[ "$signal" == TERM ]]; then
      while pid_alive "$pid" && ((SECONDS < deadline)); do sleep 0.2; done
      if pid_alive "$pid"; then
        say "node $i: pid $pid did not stop within 60s; sending SIGKILL"
        kill -KILL "$pid"
      fi
    fi
    while pid_alive "$pid"; do sleep 0.1; done
    rm -f "$(node_pid_file "$i")"
    if [[ "$signal" == KILL ]]; then
      say "node $i: killed pid $pid with SIGKILL (data kept in $(node_data "$i"))"
    else
      say "node $i: stopped pid $pid (data kept in $(node_data "$i"))"
    fi
  done
}

all_nodes() { seq 1 "$CLUSTER_NODES"; }

start_node() {
  local i="$1" pid began=$SECONDS answer
  if pid="$(node_running_pid "$i")"; then
    say "node $i: already running (pid $pid, 127.0.0.1:$(node_port "$i"))"
    return 0
  fi
  prepare_cluster_start
  rm -f "$(node_pid_file "$i")"
  [[ -f "$(node_data "$i" "$KAFKA_VERSION")/kraft/meta.properties" ]] || say "node $i: no data of Kafka $KAFKA_VERSION yet; it starts empty"
  launch_node "$i"
  answer="$(wait_node "$i" $((SECONDS + KAFKA_START_TIMEOUT)) --has-broker="$i")"
  say "node $i: ready in $((SECONDS - began))s: $answer (pid $(node_running_pid "$i"))"
}

# Waits until every partition of every topic has its full replica set in sync (asked of node $1).
wait_in_sync() {
  local i="$1" began=$SECONDS answer
  answer="$(wait_node "$i" $((SECONDS + KAFKA_START_TIMEOUT)) --min-brokers="$CLUSTER_NODES" --in-sync)"
  say "in sync after $((SECONDS - began))s: $answer"
}

rolling_restart() {
  local i began=$SECONDS
  for i in $(all_nodes); do
    node_running_pid "$i" >/dev/null || die "node $i is not running: a rolling restart needs every node up (kafka.sh --nodes 3 start)"
  done
  say "waiting until no partition is under-replicated"
  wait_in_sync 1
  for i in $(all_nodes); do
    say "rolling restart: node $i"
    signal_nodes TERM "$i"
    start_node "$i"
    wait_in_sync "$i"
  done
  say "rolling restart done in $((SECONDS - began))s"
}

cluster_status() {
  local i pid answer owner port result=0 up=0
  for i in $(all_nodes); do
    port="$(node_port "$i")"
    if pid="$(node_running_pid "$i")"; then
      owner="$(port_owner "$port")"
      if [[ -n "$owner" && "$owner" != *"(pid $pid)" ]]; then
        say "node $i: pid $pid is alive, but 127.0.0.1:$port belongs to $owner (check KAFKA_CLUSTER_PORT_BASE and KAFKA_CLUSTER_STATE_DIR)"
        ((result == 3)) || result=2
      elif answer="$(node_probe "$i" 2000 2>&1)"; then
        say "node $i: up, pid $pid, 127.0.0.1:$port, $answer"
        up=$((up + 1))
      else
        say "node $i: pid $pid is alive but 127.0.0.1:$port does not answer: $answer (log: $(node_dir "$i")/logs/server.log)"
        ((result == 3)) || result=2
      fi
    elif port_open "$port"; then
      say "node $i: down (no pid of this script), but something listens on 127.0.0.1:$port"
      result=3
    else
      say "node $i: down, 127.0.0.1:$port"
      result=3
    fi
  done
  if ((up > 0)); then
    for i in $(all_nodes); do
      if node_running_pid "$i" >/dev/null && answer="$(node_probe "$i" 3000 --in-sync 2>&1)"; then
        say "cluster: $up of $CLUSTER_NODES nodes up, Kafka $(cluster_version), all partitions in sync, data $KAFKA_CLUSTER_STATE_DIR"
        return "$result"
      fi
    done
    say "cluster: $up of $CLUSTER_NODES nodes up, Kafka $(cluster_version); $answer"
  else
    say "cluster: not running ($KAFKA_CLUSTER_STATE_DIR)"
  fi
  return "$result"
}

cluster_reset() {
  local i
  signal_nodes TERM $(all_nodes)
  for i in $(all_nodes); do rm -rf "$(node_data "$i" "$KAFKA_VERSION")"; done
  rm -f "$KAFKA_CLUSTER_STATE_DIR/cluster-id-$KAFKA_VERSION" "$KAFKA_CLUSTER_STATE_DIR/cluster.version"
  say "removed the cluster's data of Kafka $KAFKA_VERSION ($KAFKA_CLUSTER_STATE_DIR)"
}

if [[ "$KAFKA_NODES" != 1 ]]; then
  case "${1:-}" in
    fetch) major_line >/dev/null; fetch; say "jars in $JARS" ;;
    start) cluster_start ;;
    stop) signal_nodes TERM $(all_nodes) ;;
    kill) signal_nodes KILL $(all_nodes) ;;
    restart) signal_nodes TERM $(all_nodes); cluster_start ;;
    status) cluster_status ;;
    reset) cluster_reset ;;
    kill-node) check_node_number "${2:-}" "$1"; signal_nodes KILL "$2" ;;
    stop-node) check_node_number "${2:-}" "$1"; signal_nodes TERM "$2" ;;
    start-node) check_node_number "${2:-}" "$1"; start_node "$2" ;;
    restart-node) check_node_number "${2:-}" "$1"; signal_nodes TERM "$2"; start_node "$2" ;;
    rolling-restart) rolling_restart ;;
    *) die "usage: kafka.sh --nodes 3 start|stop|status|kill|restart|reset|fetch|kill-node N|stop-node N|start-node N|restart-node N|rolling-restart" ;;
  esac
  exit
fi

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
  kill-node | stop-node | start-node | restart-node | rolling-restart) die "$1 is a cluster command: kafka.sh --nodes 3 $*" ;;
  *) die "usage: kafka.sh start|stop|status|kill|restart|reset|fetch" ;;
esac

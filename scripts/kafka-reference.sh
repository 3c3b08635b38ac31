#!/usr/bin/env bash
# A real Apache Kafka 4.4 cluster on loopback, to compare this broker against.
#
#   scripts/kafka-reference.sh start     format storage, start it, wait until it is ready
#   scripts/kafka-reference.sh stop      stop every process it started, then delete its data
#   scripts/kafka-reference.sh status    which of its processes run, and the bootstrap address
#   scripts/kafka-reference.sh pid N     the process id of broker N (to SIGSTOP / SIGCONT it)
#
# The cluster is KRaft: one controller (node 0, as this broker's in-process metadata is one
# instance) and three brokers (nodes 1, 2 and 3, like our leader and its two followers),
# each its own JVM, with this broker's defaults: default.replication.factor=3,
# min.insync.replicas=2, offsets.topic.replication.factor=3,
# group.initial.rebalance.delay.ms=0 (as config/broker.toml), one partition per new topic,
# and Kafka's own defaults for everything else (replica.lag.time.max.ms 30000, ...).
#
# The jars come from Maven Central through scripts/kafka-reference/pom.xml (Maven caches them
# in ~/.m2; nothing else is downloaded). Settings, from the environment:
#   KAFKA_REF_DIR    where data, logs and pid files go      (target/kafka-reference)
#   KAFKA_REF_PORT   the controller's port; brokers 1-3 listen on the next three (29090)
#   KAFKA_REF_HEAP   each broker's heap                      (-Xms1g -Xmx1g, Kafka's default)
#   KAFKA_REF_EXTRA  more broker properties, one key=value per line, appended to each broker
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
POM_DIR="$ROOT/scripts/kafka-reference"
DIR=${KAFKA_REF_DIR:-$ROOT/target/kafka-reference}
PORT=${KAFKA_REF_PORT:-29090}
HEAP=${KAFKA_REF_HEAP:-"-Xms1g -Xmx1g"}
BROKERS=(1 2 3)

say() { printf 'kafka-reference: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

broker_port() { echo $((PORT + $1)); }
bootstrap() { echo "127.0.0.1:$(broker_port 1),127.0.0.1:$(broker_port 2),127.0.0.1:$(broker_port 3)"; }

# The runtime classpath of the pom, cached beside the data and made again when the pom changes.
classpath() {
    local cache="$ROOT/target/kafka-reference.classpath" stamp
    stamp=$(sha1sum "$POM_DIR/pom.xml" | cut -d' ' -f1)
    if [ ! -s "$cache" ] || [ "$(head -n1 "$cache")" != "$stamp" ]; then
        command -v mvn >/dev/null || die "needs Maven (mvn) on PATH"
        mkdir -p "$ROOT/target"
        say "resolving Kafka 4.4 from Maven Central (once; cached in ~/.m2)"
        mvn -q -B -f "$POM_DIR/pom.xml" dependency:build-classpath \
            -Dmdep.includeScope=runtime -Dmdep.outputFile="$cache.tmp" >&2
        { echo "$stamp"; cat "$cache.tmp"; echo; } >"$cache"
        rm -f "$cache.tmp"
    fi
    sed -n 2p "$cache"
}

jvm() {
    # Kafka's kafka-run-class.sh flags: G1 with short pauses, headless. `exec`: in a
    # background subshell the JVM takes the subshell's pid, which is the one recorded.
    # shellcheck disable=SC2086
    exec java $1 -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 \
        -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$DIR/log4j2.properties" -cp "$CP" "${@:2}"
}

common_properties() {
    cat <<EOF
controller.quorum.voters=0@127.0.0.1:$PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
EOF
}

write_configs() {
    mkdir -p "$DIR"
    cat >"$DIR/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
EOF
    {
        echo "process.roles=controller"
        echo "node.id=0"
        echo "listeners=CONTROLLER://127.0.0.1:$PORT"
        echo "log.dirs=$DIR/data/controller-0"
        # The controller writes the cluster-wide min.insync.replicas from its own config
        # (ELR, KIP-966); left out here, every topic would run with Kafka's default of 1.
        echo "min.insync.replicas=2"
        common_properties
    } >"$DIR/controller-0.properties"
    local n
    for n in "${BROKERS[@]}"; do
        {
            echo "process.roles=broker"
            echo "node.id=$n"
            echo "listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n")"
            echo "advertised.listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n")"
            echo "inter.broker.listener.name=PLAINTEXT"
            echo "log.dirs=$DIR/data/broker-$n"
            common_properties
            cat <<'EOF'
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=50
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
EOF
            if [ -n "${KAFKA_REF_EXTRA:-}" ]; then printf '%s\n' "$KAFKA_REF_EXTRA"; fi
        } >"$DIR/broker-$n.properties"
    done
}

alive() { [ -f "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }

start_node() {
    local name=$1 heap=$2
    (jvm "$heap" kafka.Kafka "$DIR/$name.properties" >"$DIR/$name.log" 2>&1) &
    echo $! >"$DIR/$name.pid"
}

# Ready means every broker has registered with the controller, is unfenced, and so is listed
# in Metadata: Kafka's own BrokerApiVersionsCommand prints one block per broker Metadata names.
wait_ready() {
    local deadline=$((SECONDS + ${KAFKA_REF_START_TIMEOUT:-180})) listed
    while ((SECONDS < deadline)); do
        for name in controller-0 "${BROKERS[@]/#/broker-}"; do
            alive "$name" || die "$name stopped while starting; see $DIR/$name.log"
        done
        listed=$( (jvm "-Xmx128m" org.apache.kafka.tools.BrokerApiVersionsCommand \
            --bootstrap-server "$(bootstrap)") 2>/dev/null | grep -c '^127\.0\.0\.1:.* (id: ' || true)
        if [ "$listed" = "${#BROKERS[@]}" ]; then
            return 0
        fi
        sleep 1
    done
    die "not ready after ${KAFKA_REF_START_TIMEOUT:-180} s; logs in $DIR"
}

cmd_start() {
    local name
    for name in controller-0 "${BROKERS[@]/#/broker-}"; do
        alive "$name" && die "already running ($name); 'stop' it first"
    done
    command -v java >/dev/null || die "needs Java 17 (java) on PATH"
    CP=$(classpath)
    rm -rf "$DIR/data"
    write_configs
    local cluster_id
    cluster_id=$( (jvm "-Xmx128m" kafka.tools.StorageTool random-uuid) 2>/dev/null | tail -n1)
    for name in controller-0 "${BROKERS[@]/#/broker-}"; do
        (jvm "-Xmx128m" kafka.tools.StorageTool format --ignore-formatted -t "$cluster_id" \
            -c "$DIR/$name.properties") >"$DIR/$name.format.log" 2>&1 ||
            die "formatting $name failed; see $DIR/$name.format.log"
    done
    say "starting controller 0 on $PORT and brokers 1-3 on $(broker_port 1)-$(broker_port 3)"
    start_node controller-0 "-Xms256m -Xmx256m"
    for name in "${BROKERS[@]}"; do
        start_node "broker-$name" "$HEAP"
    done
    wait_ready
    say "ready: bootstrap $(bootstrap)"
    bootstrap
}

cmd_stop() {
    local name pid any=0
    # One at a time, brokers from 3 down to 1 and then the controller: each SIGTERM is a
    # controlled shutdown, in which the controller moves the broker's leaders to brokers
    # still running; all at once, they wait on each other. SIGKILL only for a process still
    # there after 30 s. A stopped (SIGSTOPped) process is continued first, or it would never
    # see the SIGTERM.
    for name in broker-3 broker-2 broker-1 controller-0; do
        alive "$name" || { rm -f "$DIR/$name.pid"; continue; }
        any=1
        pid=$(cat "$DIR/$name.pid")
        kill -CONT "$pid" 2>/dev/null || true
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 300); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            say "$name did not stop in 30 s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$DIR/$name.pid"
    done
    rm -rf "$DIR/data"
    if ((any)); then say "stopped"; else say "nothing was running"; fi
}

cmd_status() {
    local name state=0
    for name in controller-0 "${BROKERS[@]/#/broker-}"; do
        if alive "$name"; then
            echo "$name: running (pid $(cat "$DIR/$name.pid"))"
        else
            echo "$name: stopped"
            state=1
        fi
    done
    echo "bootstrap: $(bootstrap)"
    return $state
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
pid)
    [ -n "${2:-}" ] || die "usage: $0 pid BROKER_ID"
    alive "broker-$2" || die "broker $2 is not running"
    cat "$DIR/broker-$2.pid"
    ;;
*)
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac

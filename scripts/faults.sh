#!/usr/bin/env bash
# Fault-injection scenarios as separate processes: `push-worker-dev kafka-mock --control` (a
# Kafka-protocol broker whose brokers can be taken down through a FIFO), `push-worker-dev
# sandbox` with failure shares (503 + Retry-After, connection resets, GOAWAY, stalls) and a
# record of every answer, real redis-server processes that get killed and restarted, and
# `push-worker run` workers that get SIGKILLed. scripts/ledger.py (confluent-kafka, an
# independent client) produces jobs with known ids and checks the outcomes and the DLQ.
# Each scenario prints one ledger row; FAULTS_ROWS=<file> keeps them (JSON lines).
# Usage: scripts/faults.sh [path/to/push-worker] [scenario…] (push-worker-dev is taken from the same folder)
#   scenarios: kill brokers redis redis-cluster redis-tls redis-handoff replica-stall provider hostile hostile-endpoints slow stalls reload (the default), refused-origins
#   (the worker's RSS grows at most 10 MB over 80 000 refused Web Push hosts once 20 000 filled its caches), sigterm (a ledger-checked
#   hand-over; scripts/e2e-shutdown.sh covers SIGTERM in `make test`); redis-tls is redis-cluster over mutual TLS with an ACL user
#   (rediss:// and PUSH_REDIS_CA_FILE, PUSH_REDIS_CERT_FILE, PUSH_REDIS_KEY_FILE)
#   reload: FAULTS_RELOAD_S sets PUSH_APPS_RELOAD_S (default 1; 0 shows its checks fail when no version is applied)
#   FAULTS_SCALE=<factor> multiplies the job counts (default 1); FAULTS_KEEP=<dir> keeps a failed scenario's
#   logs, manifest and provider record there. hostile-endpoints: FAULTS_HOSTILE_MARKERS=<m,…> limits it to some
#   markers (scripts/ledger.py HOSTILE_MARKERS); FAULTS_WEBPUSH_POLICY=legacy gives the worker
#   PUSH_WEBPUSH_ALLOW_PRIVATE=true instead of PUSH_WEBPUSH_ALLOWED_NETWORKS/_PORTS (workers that predate those).
source "$(dirname "$0")/e2e-lib.sh"
shift || true
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(kill brokers redis redis-cluster redis-tls redis-handoff replica-stall provider hostile hostile-endpoints slow stalls reload)
scale=${FAULTS_SCALE:-1}
rows=${FAULTS_ROWS:-$work/rows.jsonl}
: >"$rows"
current=""
fail() {
    echo "faults[$current]: FAIL: $*" >&2
    for log in "$work"/"$current"/worker-*.log; do
        [ -f "$log" ] || continue
        echo "--- $log" >&2
        grep -m 4 -E 'Swift runtime failure|Fatal error| in push-worker at .*/Sources/' "$log" >&2 && echo "…" >&2
        tail -n 15 "$log" >&2
    done
    if [ -n "${FAULTS_KEEP:-}" ]; then rm -rf "$FAULTS_KEEP/$current"; mkdir -p "$FAULTS_KEEP"; cp -r "$work/$current" "$FAULTS_KEEP/"; fi
    exit 1
}
scaled() { python3 -c "print(max(1, int($1 * $scale)))"; }
# Debian's python3-confluent-kafka lives in the system interpreter (not in a pyenv or venv one).
ledger_python=${LEDGER_PYTHON:-/usr/bin/python3}
"$ledger_python" -c 'import confluent_kafka' 2>/dev/null || fail "python3-confluent-kafka is not installed (scripts/install-deps.sh --test)"

# Per scenario: a directory, its processes (stopped at its end), its fixtures.
begin() {
    current=$1
    dir="$work/$1"
    mkdir -p "$dir"
    spids=()
    redis_url=""
    redis_cli=(redis-cli)
    redis_secure=()
    redis_url_prefix=redis://
    started_at=$(date +%s%N)
    echo "faults[$current]: $2"
}
spawn() { "$@" & spids+=($!); pids+=($!); }
end() {
    stop_processes "${spids[@]}"
    for pid in "${spids[@]}"; do wait "$pid" 2>/dev/null || true; done
    echo "faults[$current]: PASS in $((($(date +%s%N) - started_at) / 1000000000)) s"
}
kafka_topics=(--topic push.jobs:4 --topic push.outcomes:8 --topic push.dlq:4)
start_kafka() {  # --brokers N
    spawn "$dev_bin" kafka-mock "$@" "${kafka_topics[@]}" \
        --bootstrap-file "$dir/bootstrap" --control "$dir/kafka-control" >"$dir/kafka.log" 2>&1
    wait_for_file "$dir/bootstrap"
    brokers=$(cat "$dir/bootstrap")
}
kafka_control() {  # one command; waits for its acknowledgement
    local before
    before=$(grep -c '^control:' "$dir/kafka.log" || true)
    echo "$*" >"$dir/kafka-control"
    for _ in $(seq 1 50); do
        [ "$(grep -c '^control:' "$dir/kafka.log" || true)" -gt "$before" ] && break
        sleep 0.1
    done
    tail -n 1 "$dir/kafka.log" | grep -q '^control: ok' || fail "kafka-mock did not take \"$*\": $(tail -n 1 "$dir/kafka.log")"
}
start_sandbox() {  # sandbox fault options
    spawn "$dev_bin" sandbox --state-dir "$dir/sandbox" --record-file "$dir/record" "$@" >/dev/null 2>&1
    wait_for_file "$dir/sandbox/url"
}
start_redis() {  # [port]; append-only file fsynced on every write, so a restart keeps the records
    redis_port=${1:-$(free_port)}
    mkdir -p "$dir/redis"
    spawn redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$dir/redis" --save "" --appendonly yes \
        --appendfsync always --loglevel warning >>"$dir/redis.log"
    redis_pid=$!
    for _ in $(seq 1 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
    fail "redis-server did not start"
}
# Redis over TLS only, clients (the worker, redis-cli) and nodes verified against a CA (mutual TLS), user `worker`
# with a password and every command, `default` user off: start_redis_cluster then starts such nodes. Certificates
# made with openssl: the server's valid for 127.0.0.1, localhost and redis.push.test. Sets redis_tls (the
# directory: ca.pem, client.pem, client-key.pem).
use_redis_tls() {
    redis_tls=$dir/redis-tls
    mkdir -p "$redis_tls"
    local password
    password=$(openssl rand -hex 16)
    make_test_ca "$redis_tls" "faults Redis CA"
    issue_test_certificate "$redis_tls" server "subjectAltName=DNS:redis.push.test,DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth"
    issue_test_certificate "$redis_tls" client "extendedKeyUsage=clientAuth"
    printf 'user default off\nuser worker on >%s ~* &* +@all\n' "$password" >"$redis_tls/users.acl"
    # A node presents the client certificate when it connects to another (replication, cluster bus).
    redis_secure=(--tls-cert-file "$redis_tls/server.pem" --tls-key-file "$redis_tls/server-key.pem"
        --tls-ca-cert-file "$redis_tls/ca.pem" --tls-auth-clients yes --tls-client-cert-file "$redis_tls/client.pem"
        --tls-client-key-file "$redis_tls/client-key.pem" --tls-replication yes --tls-cluster yes
        --aclfile "$redis_tls/users.acl" --masteruser worker --masterauth "$password")
    redis_cli=(redis-cli --tls --cacert "$redis_tls/ca.pem" --cert "$redis_tls/client.pem" --key "$redis_tls/client-key.pem"
        --user worker --pass "$password" --no-auth-warning)
    redis_url_prefix="rediss://worker:$password@"
}
# 3 masters with a replica each, append-only files fsynced on every write; sets redis_url. After use_redis_tls:
# TLS only (each node's one port is its TLS port, which it announces; the cluster bus is that port + 10000), ACL.
start_redis_cluster() {
    cluster_ports=()
    for _ in 1 2 3 4 5 6; do
        local port listen
        port=$(free_cluster_port)
        listen=(--port "$port")
        [ ${#redis_secure[@]} -eq 0 ] || listen=(--port 0 --tls-port "$port" "${redis_secure[@]}")
        mkdir -p "$dir/redis-cluster/$port"
        spawn redis-server "${listen[@]}" --bind 127.0.0.1 --dir "$dir/redis-cluster/$port" --cluster-enabled yes \
            --cluster-config-file nodes.conf --cluster-node-timeout 2000 --save "" --appendonly yes --appendfsync always \
            --loglevel warning >>"$dir/redis.log"
        eval "redis_cluster_pid_$port=$!"
        cluster_ports+=("$port")
    done
    create_redis_cluster 1 "${cluster_ports[@]}"
    redis_url="${redis_url_prefix}127.0.0.1:${cluster_ports[0]},127.0.0.1:${cluster_ports[1]}/0"
}
cluster_masters() {  # the ports of the nodes that are masters now, one per line
    for port in "${cluster_ports[@]}"; do
        if [ "$("${redis_cli[@]}" -p "$port" role 2>/dev/null | sed -n 1p)" = master ]; then echo "$port"; fi
    done
    return 0
}
worker_wrapper=()  # a command the worker runs under (e.g. strace)
start_worker() {  # name [VAR=value …]
    local name=$1
    shift
    local port
    port=$(free_port)
    eval "http_port_$name=$port"
    spawn env PUSH_KAFKA_BROKERS="$brokers" PUSH_REDIS_URL="${redis_url:-redis://127.0.0.1:$redis_port/0}" PUSH_HTTP_PORT="$port" \
        PUSH_PROXY_URL="$(cat "$dir/sandbox/url")" PUSH_PROXY_CA_FILE="$dir/sandbox/ca.pem" PUSH_SHUTDOWN_GRACE_S=5 \
        PUSH_RDKAFKA_SESSION_TIMEOUT_MS=6000 PUSH_RDKAFKA_HEARTBEAT_INTERVAL_MS=1000 PUSH_RETRY_BASE_MS=200 \
        "$@" "${worker_wrapper[@]}" "$bin" run >"$dir/worker-$name.log" 2>&1
    eval "pid_$name=$!"
}
wait_ready() {  # name
    local port
    port=$(eval echo "\$http_port_$1")
    for _ in $(seq 1 200); do
        [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ] && return 0
        sleep 0.1
    done
    fail "worker $1 never became ready"
}
readyz() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$(eval echo "\$http_port_$1")/readyz" || true; }
metric() {  # name metric: the sum of its samples
    curl -s "http://127.0.0.1:$(eval echo "\$http_port_$1")/metrics" | awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2 } END { print s + 0 }'
}
peak_rss_kb() { awk '/^VmHWM/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
answered() { [ -f "$dir/record" ] && wc -l <"$dir/record" || echo 0; }
wait_answered() {  # at least N provider answers
    for _ in $(seq 1 1200); do [ "$(answered)" -ge "$1" ] && return 0; sleep 0.1; done
    fail "the provider saw only $(answered) of $1 requests"
}
produce() { "$ledger_python" scripts/ledger.py produce --brokers "$brokers" --manifest "$dir/manifest" "$@" || fail "producing jobs failed"; }
check() { "$ledger_python" scripts/ledger.py check --brokers "$brokers" --manifest "$dir/manifest" --record "$dir/record" \
    --scenario "$current" --row "$rows" "$@" || fail "the ledger does not balance"; }
stop_worker() {  # name: SIGTERM, wait, must exit 0
    local pid status
    pid=$(eval echo "\$pid_$1")
    kill -TERM "$pid"
    set +e; wait "$pid"; status=$?; set -e
    [ "$status" -eq 0 ] || fail "worker $1 exited with $status after SIGTERM"
}

scenario_kill() {
    local jobs
    jobs=$(scaled 20000)
    begin kill "two workers in one group, SIGKILL one in the middle of a $jobs-job stream"
    start_kafka; start_sandbox; start_redis
    start_worker a PUSH_MAX_IN_FLIGHT=500; start_worker b PUSH_MAX_IN_FLIGHT=500
    wait_ready a; wait_ready b
    produce --prefix k --count "$jobs" --users 2000
    wait_answered $((jobs / 3))
    local rss
    rss=$(peak_rss_kb "$pid_a")
    local killed_at
    killed_at=$(date +%s%3N)
    kill -9 "$pid_a"
    echo "faults[kill]: SIGKILL worker a after $(answered) provider answers"
    # What the provider accepted in the moment of the kill may be sent again (window 1): at most the
    # killed worker's in-flight limit, and only answers given around the kill or on the killed worker's
    # connections before the sandbox saw them close (it may read requests written before the kill later).
    check --timeout 150 --max-duplicates 500 --broken-at "$killed_at" --expect delivered --rss-kb "$rss" --rss-pids "$pid_b"
    stop_worker b
    end
}

scenario_sigterm() {
    local jobs
    jobs=$(scaled 10000)
    begin sigterm "two workers in one group, SIGTERM one in the middle of a $jobs-job stream"
    start_kafka; start_sandbox; start_redis
    start_worker a; start_worker b
    wait_ready a; wait_ready b
    produce --prefix t --count "$jobs" --users 1000
    wait_answered $((jobs / 3))
    local rss
    rss=$(peak_rss_kb "$pid_a")
    stop_worker a
    echo "faults[sigterm]: worker a stopped cleanly after $(answered) provider answers"
    check --timeout 150 --max-duplicates 0 --expect delivered --rss-kb "$rss" --rss-pids "$pid_b"
    stop_worker b
    end
}

scenario_brokers() {
    local jobs
    jobs=$(scaled 10000)
    begin brokers "all 3 brokers down for 10 s in the middle of a $jobs-job stream"
    start_kafka --brokers 3; start_sandbox; start_redis
    start_worker a; wait_ready a
    produce --prefix br --count "$jobs" --users 1000
    wait_answered $((jobs / 4))
    kafka_control broker-down all
    sleep 10
    kafka_control broker-up all
    check --timeout 150 --max-duplicates 0 --expect delivered --rss-pids "$pid_a"
    stop_worker a
    end
}

scenario_redis() {
    local jobs
    jobs=$(scaled 10000)
    begin redis "redis-server SIGKILLed for 10 s in the middle of a $jobs-job stream, restarted from its append-only file"
    start_kafka; start_sandbox; start_redis
    start_worker a; wait_ready a
    produce --prefix rd --count "$jobs" --users 1000
    wait_answered $((jobs / 4))
    kill -9 "$redis_pid"
    local down_at
    down_at=$(answered)
    sleep 4
    [ "$(readyz a)" != 200 ] || fail "/readyz still 200 4 s after Redis died"
    local frozen
    frozen=$(answered)
    sleep 6
    # Paused: at most the requests already in flight when Redis died reach the provider.
    echo "faults[redis]: provider answers while Redis was down: $((frozen - down_at)) in the first 4 s, $(($(answered) - frozen)) in the next 6 s; /readyz $(readyz a)"
    [ $(($(answered) - frozen)) -le 1000 ] || fail "the worker kept sending while Redis was down"
    start_redis "$redis_port"
    for _ in $(seq 1 100); do [ "$(readyz a)" = 200 ] && break; sleep 0.2; done
    [ "$(readyz a)" = 200 ] || fail "/readyz not 200 again after Redis came back"
    check --timeout 150 --max-duplicates 0 --expect delivered --rss-pids "$pid_a"
    stop_worker a
    end
}

# Two workers on the cluster start_redis_cluster starts; one master SIGKILLed in the middle of a stream of `jobs` jobs,
# its replica takes over; nothing is lost. The workers get these settings besides.
cluster_failover() {  # prefix jobs [VAR=value …]
    local prefix=$1 jobs=$2
    shift 2
    start_kafka; start_sandbox; start_redis_cluster
    start_worker a PUSH_MAX_IN_FLIGHT=500 "$@"; start_worker b PUSH_MAX_IN_FLIGHT=500 "$@"
    wait_ready a; wait_ready b
    produce --prefix "$prefix" --count "$jobs" --users 1000
    wait_answered $((jobs / 3))
    local victim survivors killed_at
    victim=$(cluster_masters | sed -n 1p)
    killed_at=$(date +%s%3N)
    kill -9 "$(eval echo "\$redis_cluster_pid_$victim")"
    echo "faults[$current]: SIGKILL master 127.0.0.1:$victim after $(answered) provider answers"
    survivors=()
    for port in "${cluster_ports[@]}"; do [ "$port" = "$victim" ] || survivors+=("$port"); done
    # The survivors notice the death after cluster-node-timeout (2 s); then the replica is elected.
    for _ in $(seq 1 300); do [ "$(cluster_masters | wc -l)" -ge 3 ] && break; sleep 0.1; done
    [ "$(cluster_masters | wc -l)" -ge 3 ] || fail "no replica took over from the killed master"
    wait_cluster_ok "${survivors[@]}"
    echo "faults[$current]: a replica took over after $(($(date +%s%3N) - killed_at)) ms; masters now $(cluster_masters | tr '\n' ' ')"
    # Replication is asynchronous: records a dying master had acknowledged but not yet passed on are lost,
    # so targets answered shortly before the kill may be sent again (window 1, like a killed worker's).
    check --timeout 150 --max-duplicates 1000 --broken-at "$killed_at" --expect delivered --rss-pids "$pid_a,$pid_b"
    local keys=()
    for port in $(cluster_masters); do keys+=("$port:$("${redis_cli[@]}" -p "$port" dbsize)"); done
    echo "faults[$current]: keys per master (port:keys): ${keys[*]}"
    for entry in "${keys[@]}"; do [ "${entry#*:}" -gt 0 ] || fail "a master holds no keys: ${keys[*]}"; done
    stop_worker a; stop_worker b
}

scenario_redis_cluster() {
    local jobs
    jobs=$(scaled 10000)
    begin redis-cluster "two workers on a 3-master Redis Cluster (a replica each); one master SIGKILLed in the middle of a $jobs-job stream, its replica takes over"
    cluster_failover rc "$jobs"
    end
}

# The same over mutual TLS as user `worker` (its `default` user off): the nodes announce their TLS ports and IP
# addresses, which the server certificate carries; the workers reconnect to the promoted replica over TLS.
scenario_redis_tls() {
    local jobs
    jobs=$(scaled 10000)
    begin redis-tls "two workers on a 3-master Redis Cluster (a replica each) over mutual TLS with an ACL user; one master SIGKILLed in the middle of a $jobs-job stream, its replica takes over"
    use_redis_tls
    cluster_failover rt "$jobs" PUSH_REDIS_CA_FILE="$redis_tls/ca.pem" PUSH_REDIS_CERT_FILE="$redis_tls/client.pem" \
        PUSH_REDIS_KEY_FILE="$redis_tls/client-key.pem"
    end
}

# Sets `victim` (the cluster's first master) and `replica` (its replica), waits until the replica is in sync (one still
# taking its first copy is not waited for: it could not acknowledge), then freezes it (SIGSTOP): it acknowledges
# nothing, so the master's writes exist only there from now on.
freeze_replica_of_first_master() {
    victim=$(cluster_masters | sed -n 1p)
    replica=
    for port in "${cluster_ports[@]}"; do
        [ "$(redis-cli -p "$port" role | sed -n 1p)" = slave ] && [ "$(redis-cli -p "$port" role | sed -n 3p)" = "$victim" ] && replica=$port
    done
    [ -n "$replica" ] || fail "no replica of master $victim"
    for _ in $(seq 1 300); do redis-cli -p "$victim" info replication | grep -q 'state=online' && break; sleep 0.1; done
    redis-cli -p "$victim" info replication | grep -q 'state=online' || fail "the replica of master $victim never got in sync"
    kill -STOP "$(eval echo "\$redis_cluster_pid_$replica")"
}

scenario_redis_handoff() {
    local jobs
    jobs=$(scaled 2000)
    begin redis-handoff "every first attempt answered 503 + Retry-After: 3 on a 3-master Redis Cluster (a replica each): $jobs jobs handed to the retry queue while one master's replica is frozen (SIGSTOP); that master SIGKILLed, its replica thawed takes over"
    start_kafka; start_sandbox --fail-share 1 --fail-status 503 --retry-after 3 --max-faults-per-target 1; start_redis_cluster
    # Every first attempt fails on purpose: no circuit may open over it.
    start_worker a PUSH_CIRCUIT_FAILURES=100000; wait_ready a
    local killed_at entries
    freeze_replica_of_first_master
    produce --prefix ho --count "$jobs" --users 500
    # Each 503 is a hand-off; the job's offset may be committed only once a replica has it. The hand-offs to the
    # frozen replica's master fall short of WAIT: their jobs wait, uncommitted.
    wait_answered $((jobs / 10))
    sleep 3
    entries=$(redis-cli -p "$victim" --scan --pattern 'push:{retry:*}:entry:*' | wc -l)
    killed_at=$(date +%s%3N)
    kill -9 "$(eval echo "\$redis_cluster_pid_$victim")"
    kill -CONT "$(eval echo "\$redis_cluster_pid_$replica")"
    echo "faults[redis-handoff]: SIGKILL master 127.0.0.1:$victim holding $entries retry entries its frozen replica never acknowledged, after $(answered) provider answers"
    [ "$entries" -gt 0 ] || fail "the killed master held no retry entries: the scenario tested nothing"
    local survivors=()
    for port in "${cluster_ports[@]}"; do [ "$port" = "$victim" ] || survivors+=("$port"); done
    for _ in $(seq 1 300); do [ "$(cluster_masters | wc -l)" -ge 3 ] && break; sleep 0.1; done
    [ "$(cluster_masters | wc -l)" -ge 3 ] || fail "no replica took over from the killed master"
    wait_cluster_ok "${survivors[@]}"
    echo "faults[redis-handoff]: the replica took over after $(($(date +%s%3N) - killed_at)) ms"
    # Lost: a hand-off acknowledged (its job committed) that the replica did not have. Duplicates are allowed: dedupe and
    # idempotency records are not waited for, so a target answered before the kill may be sent again (window 1).
    check --timeout 100 --max-duplicates "$jobs" --broken-at "$killed_at" --expect delivered --rss-pids "$pid_a"
    stop_worker a
    end
}

# A replica that stays connected but acknowledges nothing (SIGSTOP) for 20 s while retries are handed off to its
# master: the hand-offs there fall short of `WAIT 1`, and only their jobs wait (uncommitted, holding no in-flight
# capacity); the store stays available and intake goes on for every other job. Thawed, the replica is made master at
# once (its master SIGKILLed): entries it had not caught up with are lost with the master, and the jobs that waited
# for them write them again, so the ledger still finds every target delivered.
scenario_replica_stall() {
    local batch rounds=10 stalled_at during shortfalls killed_at
    batch=$(scaled 150)
    begin replica-stall "every first attempt answered 503 + Retry-After: 3 on a 3-master Redis Cluster (a replica each): one master's replica frozen (SIGSTOP) for 20 s while $((batch * rounds)) jobs are handed off; then thawed and its master SIGKILLed"
    start_kafka; start_sandbox --fail-share 1 --fail-status 503 --retry-after 3 --max-faults-per-target 1; start_redis_cluster
    # Every first attempt fails on purpose: no circuit may open over it.
    start_worker a PUSH_CIRCUIT_FAILURES=100000; wait_ready a
    freeze_replica_of_first_master
    stalled_at=$(answered)
    for round in $(seq 1 "$rounds"); do
        produce --prefix "rs$round" --count "$batch" --users 500
        sleep 2
        [ "$(readyz a)" = 200 ] || fail "/readyz $(readyz a) while a replica lags (round $round): a lagging replica is not a store outage"
        ! grep -q 'shared store unavailable' "$dir/worker-a.log" || fail "the worker paused its intake for a lagging replica (round $round)"
    done
    during=$(($(answered) - stalled_at))
    shortfalls=$(metric_sample a push_store_errors_total '{reason="replication_shortfall"}')
    echo "faults[replica-stall]: replica 127.0.0.1:$replica of master $victim frozen 20 s: $during provider answers meanwhile, push_store_errors_total{reason=\"replication_shortfall\"} ${shortfalls:-0}, $(redis-cli -p "$victim" --scan --pattern 'push:{retry:*}:entry:*' | wc -l) retry entries on that master"
    [ "${shortfalls:-0}" != 0 ] || fail "no hand-off fell short: the scenario tested nothing"
    # Every job produced during the stall had its first attempt: intake never paused for the lagging replica.
    [ "$during" -ge $((batch * rounds)) ] || fail "only $during of $((batch * rounds)) jobs reached the provider while the replica lagged"
    kill -CONT "$(eval echo "\$redis_cluster_pid_$replica")"
    killed_at=$(date +%s%3N)
    kill -9 "$(eval echo "\$redis_cluster_pid_$victim")"
    echo "faults[replica-stall]: replica thawed and master 127.0.0.1:$victim SIGKILLed after $(answered) provider answers"
    local survivors=()
    for port in "${cluster_ports[@]}"; do [ "$port" = "$victim" ] || survivors+=("$port"); done
    for _ in $(seq 1 300); do [ "$(cluster_masters | wc -l)" -ge 3 ] && break; sleep 0.1; done
    [ "$(cluster_masters | wc -l)" -ge 3 ] || fail "no replica took over from the killed master"
    wait_cluster_ok "${survivors[@]}"
    echo "faults[replica-stall]: the replica took over after $(($(date +%s%3N) - killed_at)) ms"
    # Duplicates are allowed (records are not waited for: window 4); a lost target is a hand-off committed too early.
    check --timeout 150 --max-duplicates $((batch * rounds)) --broken-at "$killed_at" --expect delivered --rss-pids "$pid_a"
    stop_worker a
    end
}

scenario_provider() {
    local jobs
    jobs=$(scaled 5000)
    begin provider "provider fails 30 % with 503 + Retry-After: 1, 0.05 % connection resets, a graceful GOAWAY every 700 answers ($jobs jobs)"
    start_kafka; start_sandbox --fail-share 0.3 --fail-status 503 --retry-after 1 --reset-share 0.0005 --goaway-every 700 \
        --max-faults-per-target 2
    start_redis
    # One reset fails every stream in flight on its connection at once (~100-200 "failures in a row"),
    # which would open the default 50-failure circuit for 30 s and burn attempts against it (see RELIABILITY.md).
    # PUSH_MAX_ATTEMPTS=10: a target meets up to two 503s of its own plus the failures of streams that shared a
    # connection with a reset; the default 5 attempts can run out on that alone.
    start_worker a PUSH_CIRCUIT_FAILURES=1000 PUSH_MAX_ATTEMPTS=10; wait_ready a
    produce --prefix pv --count "$jobs" --users 1000
    # A reset may swallow answers the provider already gave: those targets are sent again (explained duplicates).
    check --timeout 150 --max-duplicates "$jobs" --max-unexplained-duplicates 0 --expect delivered --retry-after-ms 1000 \
        --rss-pids "$pid_a"
    echo "faults[provider]: injected $(awk '$3 == "503"' "$dir/record" | wc -l) × 503, $(awk '$3 == "reset"' "$dir/record" | wc -l) resets," \
        "$(awk '$3 ~ /^goaway:/' "$dir/record" | wc -l) GOAWAYs in $(wc -l <"$dir/record") provider answers"
    stop_worker a
    end
}

scenario_hostile() {
    local jobs
    jobs=$(scaled 10000)
    begin hostile "$jobs hostile jobs mixed into $jobs valid ones"
    start_kafka; start_sandbox; start_redis
    start_worker a; wait_ready a
    produce --prefix hv --count "$jobs" --hostile "$jobs" --users 1000
    check --timeout 200 --max-duplicates 0 --expect delivered --rss-pids "$pid_a"
    stop_worker a
    end
}

scenario_hostile_endpoints() {
    local jobs
    jobs=$(scaled 1700)
    begin hostile-endpoints "$jobs jobs × (APNs, Web Push, proxy) targets; some endpoints hostile (scripts/ledger.py HOSTILE_MARKERS)"
    command -v strace >/dev/null || fail "strace is not installed (scripts/install-deps.sh --test)"
    # Stalls last longer than the worker's 10 s request timeout; stalls and resets at most twice per target.
    start_kafka; start_sandbox --hostile --hostile-stall-ms 12000 --max-faults-per-target 2; start_redis
    "$bin" vapid-keys --output "$dir/vapid.pem" >/dev/null
    local state=$dir/sandbox webpush_port policy
    webpush_port=$(sed 's/.*://' "$state/webpush-url")
    if [ "${FAULTS_WEBPUSH_POLICY:-}" = legacy ]; then
        policy=(PUSH_WEBPUSH_ALLOW_PRIVATE=true)
    else
        # Only loopback (where the sandbox listens) may be a private endpoint address, and only the sandbox's
        # port besides 443: 10.x, NAT64 and IPv4-mapped endpoints stay refused.
        policy=(PUSH_WEBPUSH_ALLOWED_NETWORKS=127.0.0.0/8,::1/128 PUSH_WEBPUSH_ALLOWED_PORTS="$webpush_port")
    fi
    # Every connect() the worker makes, to show no request left for a private endpoint (seccomp-filtered: cheap).
    worker_wrapper=(strace -f -qq --seccomp-bpf -e trace=connect -e signal=none -o "$dir/connects" --)
    # PUSH_MAX_ATTEMPTS=10: a target meets up to two faults of its own plus failures of streams that shared a
    # connection with a reset. PUSH_CIRCUIT_FAILURES: a reset fails every stream in flight at once (see
    # scenario_provider). PUSH_CIRCUIT_COOLDOWN_MS above every TTL: a circuit one hostile target opens for its
    # app shows as expired outcomes, not as a delay. PUSH_RETRY_MAX_MS keeps retries well inside the 90 s TTL (a stall target may meet two 10 s timeouts plus failures of streams that shared a reset connection).
    start_worker a PUSH_MAX_ATTEMPTS=10 PUSH_RETRY_MAX_MS=2000 PUSH_CIRCUIT_FAILURES=100000 PUSH_CIRCUIT_COOLDOWN_MS=300000 \
        PUSH_APNS_KEY_FILE="$state/AuthKey_KEYID4APNS.p8" PUSH_APNS_KEY_ID=KEYID4APNS PUSH_APNS_TEAM_ID=TEAM123456 \
        PUSH_APNS_BUNDLE_ID=com.example.chat PUSH_APNS_HOST=localhost PUSH_APNS_PORT="$(cat "$state/apns-port")" \
        PUSH_APNS_CA_FILE="$state/ca.pem" PUSH_WEBPUSH_VAPID_KEY_FILE="$dir/vapid.pem" \
        PUSH_WEBPUSH_VAPID_SUBJECT=mailto:faults@example.com PUSH_WEBPUSH_CA_FILE="$state/ca.pem" "${policy[@]}"
    worker_wrapper=()
    # strace forks short-lived children of its own to probe the kernel: the worker is the child running $bin.
    local worker="" child worker_exe
    worker_exe=$(readlink -f "$bin")
    for _ in $(seq 1 50); do
        for child in $(cat "/proc/$pid_a/task/$pid_a/children" 2>/dev/null); do
            [ "$(readlink -f "/proc/$child/exe" 2>/dev/null)" = "$worker_exe" ] && worker=$child
        done
        [ -n "$worker" ] && break
        sleep 0.1
    done
    [ -n "$worker" ] || fail "the worker did not start under strace"
    wait_ready a
    # Paced, so few requests are in flight when a hostile answer comes (an answer then affecting others shows).
    "$ledger_python" scripts/ledger.py produce-endpoints --brokers "$brokers" --manifest "$dir/manifest" --prefix he \
        --count "$jobs" --sandbox-dir "$state" --scale "$scale" --ttl 90 --rate 250 ${FAULTS_HOSTILE_MARKERS:+--markers "$FAULTS_HOSTILE_MARKERS"} \
        || fail "producing jobs failed"
    # A reset may swallow answers already given on its connection: those targets are sent again (explained duplicates).
    check --rss-kb "$(peak_rss_kb "$worker")" --timeout 150 --max-duplicates "$((jobs * 3))" --max-unexplained-duplicates 0 --expect delivered \
        --rss-pids "$worker" --alive-pids "$worker" --connect-log "$dir/connects"
    echo "faults[hostile-endpoints]: sandbox answers: $(awk '{ print $3 }' "$dir/record" | sort | uniq -c | sort -rn | awk '{ printf "%s×%s ", $1, $2 }')"
    kill -TERM "$worker"
    local status
    set +e; wait "$pid_a"; status=$?; set -e
    [ "$status" -eq 0 ] || fail "worker a exited with $status after SIGTERM"
    end
}

scenario_slow() {
    local jobs limit=200
    jobs=$(scaled 1500)
    begin slow "slow provider (2 s per request), $jobs jobs, PUSH_MAX_IN_FLIGHT=$limit"
    start_kafka; start_sandbox; start_redis
    start_worker a PUSH_MAX_IN_FLIGHT=$limit PUSH_MAX_READ_AHEAD=$((2 * limit)); wait_ready a
    produce --prefix sl --count "$jobs" --user-prefix slow-
    # Jobs consumed but unfinished (taken from Kafka into the process) stay within the read-ahead bound
    # (PUSH_MAX_READ_AHEAD, set to 2 × the limit here, below the jobs produced: a lane at capacity reads on to find other apps' jobs),
    # and the requests the provider holds at once (every answer takes 2 s, so those recorded within any
    # 2 s) stay within the limit: jobs read ahead wait as values, unsent.
    local peak=0 held=0 running=0 value consumed finished
    for _ in $(seq 1 40); do
        value=$(metric a push_jobs_in_flight)
        value=${value%.*}
        [ "$value" -gt "$peak" ] && peak=$value
        value=$(metric a push_jobs_running)
        value=${value%.*}
        [ "$value" -gt "$running" ] && running=$value
        consumed=$(metric a push_jobs_consumed_total)
        finished=$(metric a push_deliveries_total)
        value=$((${consumed%.*} - ${finished%.*}))
        [ "$value" -gt "$held" ] && held=$value
        sleep 0.25
    done
    local sent
    sent=$(python3 - "$dir/record" <<'PY'
import sys
times = sorted(int(line.split()[0]) for line in open(sys.argv[1]) if line.strip())
peak, first = 0, 0
for last, at in enumerate(times):
    while at - times[first] >= 2000: first += 1
    peak = max(peak, last - first + 1)
print(peak)
PY
)
    echo "faults[slow]: peak jobs consumed and unfinished $peak (gauge), $held (counters); peak jobs running $running; peak requests at the provider $sent (limit $limit, read-ahead $((2 * limit)))"
    [ "$sent" -le "$limit" ] || fail "$sent requests at the provider at once, above the limit $limit"
    [ "$sent" -ge $((limit / 4)) ] || fail "only $sent requests at the provider at once: the slow provider was not the bottleneck"
    [ "$peak" -le $((2 * limit)) ] || fail "$peak jobs consumed and unfinished, above the read-ahead bound $((2 * limit))"
    [ "$running" -le "$limit" ] || fail "$running jobs running, above PUSH_MAX_IN_FLIGHT $limit"
    [ "$running" -ge $((limit / 4)) ] || fail "only $running jobs running at once: push_jobs_running does not count them"
    [ "$held" -le $((2 * limit)) ] || fail "$held jobs consumed but unfinished, above the read-ahead bound $((2 * limit)): the consumer buffers"
    check --timeout 200 --max-duplicates 0 --expect delivered --rss-pids "$pid_a"
    stop_worker a
    end
}

# State keyed by outside values stays bounded: jobs whose Web Push endpoints are each on a host of its own that refuses
# them (scripts/ledger.py produce-refused --names): a private 10.x.y.z, by literal or by a name, refused by the policy
# before any connection; or a name of a loopback 127.x.y.z (allowed here) where nothing listens, refused by the host,
# so each costs a VAPID token, a circuit breaker, a connection pool and two failed connections (PUSH_MAX_ATTEMPTS=2).
# scripts/refused-dns.py answers the names (the worker's own mount namespace sees a resolv.conf naming it).
# 20 000 hosts fill every bounded map (10 000 DNS answers, VAPID tokens and breakers each); 80 000 more must not grow
# the worker's RSS by more than FAULTS_REFUSED_GROWTH_MB (default 10), read 15 s after each phase. Not in the
# default list. FAULTS_REFUSED_WRAPPER=<command…> runs the worker under a command that execs it (keeping its pid),
# such as one that sets LD_PRELOAD for a heap profiler (FAULTS_REFUSED_TIMEOUT_S, default 300, gives each phase longer
# to finish under it); FAULTS_REFUSED_INSPECT=<command> runs with the worker's pid
# after each reading (e.g. to print the allocator's statistics).
scenario_refused_origins() {
    local fill more ready filled after growth limit_mb=${FAULTS_REFUSED_GROWTH_MB:-10} resolver=127.8.8.10
    fill=$(scaled 20000)
    more=$(scaled 80000)
    begin refused-origins "$fill then $more Web Push jobs, every endpoint on another host that refuses it"
    # The mock cluster keeps about 5 MiB per partition: enough partitions that the ledger still reads every outcome.
    local topics=("${kafka_topics[@]}")
    kafka_topics=(--topic push.jobs:32 --topic push.outcomes:64 --topic push.dlq:4)
    start_kafka; start_sandbox; start_redis
    kafka_topics=("${topics[@]}")
    printf 'nameserver %s\noptions timeout:2 attempts:2\n' "$resolver" >"$dir/resolv.conf"
    spawn python3 scripts/refused-dns.py "$resolver" >"$dir/dns.log" 2>&1
    "$bin" vapid-keys --output "$dir/vapid.pem" >/dev/null
    local profiler=()
    read -r -a profiler <<<"${FAULTS_REFUSED_WRAPPER:-}"
    worker_wrapper=(unshare -m sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$dir/resolv.conf" "${profiler[@]}")
    # In flight at most the DNS resolver's queue (256 hosts), so that no lookup is refused as busy and retried.
    # jemalloc's background thread purges the pages it keeps once they decay (10 s): without it an arena that goes
    # idle keeps them, and which arenas the last jobs touched would add 5-15 MB of noise to the readings.
    start_worker a PUSH_WEBPUSH_VAPID_KEY_FILE="$dir/vapid.pem" PUSH_WEBPUSH_VAPID_SUBJECT=mailto:faults@example.com \
        PUSH_MAX_IN_FLIGHT=200 PUSH_WEBPUSH_ALLOWED_NETWORKS=127.0.0.0/8 PUSH_MAX_ATTEMPTS=2 PUSH_RETRY_MAX_MS=500 \
        MALLOC_CONF="${MALLOC_CONF:-background_thread:true}"
    worker_wrapper=()
    wait_ready a
    ready=$(rss_kb "$pid_a")
    "$ledger_python" scripts/ledger.py produce-refused --brokers "$brokers" --manifest "$dir/manifest" --prefix rf \
        --names --count "$fill" --sandbox-dir "$dir/sandbox" || fail "producing jobs failed"
    check --timeout "${FAULTS_REFUSED_TIMEOUT_S:-300}" --max-duplicates 0 --rss-pids "$pid_a"
    sleep 15
    filled=$(rss_kb "$pid_a")
    [ -z "${FAULTS_REFUSED_INSPECT:-}" ] || $FAULTS_REFUSED_INSPECT "$pid_a"
    echo "faults[refused-origins]: RSS once ready $((ready / 1024)) MB, after $fill hosts $((filled / 1024)) MB; $(bounded_entries a)"
    refused_maps_full "after $fill hosts"
    "$ledger_python" scripts/ledger.py produce-refused --brokers "$brokers" --manifest "$dir/manifest" --prefix ro \
        --names --first "$fill" --count "$more" --sandbox-dir "$dir/sandbox" || fail "producing jobs failed"
    check --timeout "${FAULTS_REFUSED_TIMEOUT_S:-300}" --max-duplicates 0 --rss-pids "$pid_a"
    sleep 15
    after=$(rss_kb "$pid_a")
    [ -z "${FAULTS_REFUSED_INSPECT:-}" ] || $FAULTS_REFUSED_INSPECT "$pid_a"
    growth=$((after - filled))
    echo "faults[refused-origins]: RSS after $more more hosts $((after / 1024)) MB ($((growth / 1024)) MB more), peak $(($(peak_rss_kb "$pid_a") / 1024)) MB; $(bounded_entries a)"
    [ "$growth" -le $((limit_mb * 1024)) ] || fail "RSS grew by $((growth / 1024)) MB over $more hosts after $fill filled the caches (at most $limit_mb MB)"
    refused_maps_full "after $more more hosts"
    stop_worker a
    end
}
bounded_entries() {  # name: the sizes of its maps keyed by outside values
    echo "push_circuit_breakers $(metric "$1" push_circuit_breakers); $(curl -s "http://127.0.0.1:$(eval echo "\$http_port_$1")/metrics" \
        | awk '/^push_bounded_entries/ { printf "%s %s; ", $1, $2 }')"
}
refused_maps_full() {  # when: worker a's maps keyed by hosts are at or near their bounds (10 000 each)
    local tokens answers breakers
    [ "$(scaled 20000)" -ge 20000 ] || return 0  # FAULTS_SCALE below 1 leaves them short of their bounds
    tokens=$(metric_sample a push_bounded_entries '{map="vapid_tokens"}')
    [ "${tokens%.*}" = 10000 ] || fail "$1: $tokens VAPID tokens kept, not their bound 10000"
    # Beyond its bound the breakers' map drops to nine tenths of it.
    breakers=$(metric a push_circuit_breakers)
    [ "$breakers" -ge 9000 ] && [ "$breakers" -le 10000 ] || fail "$1: $breakers circuit breakers kept, not 9000-10000"
    # DNS answers are kept 60 s: a slow run (under a profiler) sees the first ones gone.
    answers=$(metric_sample a push_bounded_entries '{map="webpush_dns_cache"}')
    [ "${answers%.*}" -ge 1 ] && [ "${answers%.*}" -le 10000 ] || fail "$1: $answers DNS answers cached, not 1-10000"
}

# Bounded waits: what does not answer must not stop or bloat a replica (one slow user, an outage with scarce
# slots, two replicas whose retries wait for slots longer than a lease would last without renewal).
scenario_stalls() {
    stalls_slow_user
    stalls_slow_users
    stalls_silent_dns
    stalls_flaky_dns
    stalls_outage
    stalls_leases
}
# Worker a, delivering APNs, Web Push (loopback allowed, the sandbox's port) and proxy targets of the hostile sandbox,
# in a mount namespace of its own whose /etc/resolv.conf is $dir/resolv.conf (a test name server); ready on return.
start_worker_behind_resolver() {  # [VAR=value …]
    local state=$dir/sandbox webpush_port
    "$bin" vapid-keys --output "$dir/vapid.pem" >/dev/null
    webpush_port=$(sed 's/.*://' "$state/webpush-url")
    worker_wrapper=(unshare -m sh -c 'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$dir/resolv.conf")
    start_worker a "$@" \
        PUSH_APNS_KEY_FILE="$state/AuthKey_KEYID4APNS.p8" PUSH_APNS_KEY_ID=KEYID4APNS PUSH_APNS_TEAM_ID=TEAM123456 \
        PUSH_APNS_BUNDLE_ID=com.example.chat PUSH_APNS_HOST=localhost PUSH_APNS_PORT="$(cat "$state/apns-port")" \
        PUSH_APNS_CA_FILE="$state/ca.pem" PUSH_WEBPUSH_VAPID_KEY_FILE="$dir/vapid.pem" \
        PUSH_WEBPUSH_VAPID_SUBJECT=mailto:faults@example.com PUSH_WEBPUSH_CA_FILE="$state/ca.pem" \
        PUSH_WEBPUSH_ALLOWED_NETWORKS=127.0.0.0/8,::1/128 PUSH_WEBPUSH_ALLOWED_PORTS="443,$webpush_port"
    worker_wrapper=()
    wait_ready a
}
stalls_silent_dns() {
    local jobs silent
    jobs=$(scaled 300)
    begin stalls-silent-dns "$jobs jobs × (APNs, Web Push, proxy); some Web Push endpoints on a host whose name server never answers"
    # The worker's own mount namespace sees a resolv.conf naming a loopback name server that reads queries and
    # never answers; nothing leaves the machine.
    silent=127.8.8.8
    printf 'nameserver %s\noptions timeout:30 attempts:1\n' "$silent" >"$dir/resolv.conf"
    spawn python3 -c "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(('$silent', 53))
while True: s.recv(4096)"
    start_kafka; start_sandbox --hostile --max-faults-per-target 2; start_redis
    start_worker_behind_resolver PUSH_MAX_ATTEMPTS=3 PUSH_RETRY_MAX_MS=1000 PUSH_WEBPUSH_DNS_TIMEOUT_MS=1000
    local t0=$(date +%s%3N)
    "$ledger_python" scripts/ledger.py produce-endpoints --brokers "$brokers" --manifest "$dir/manifest" --prefix sd \
        --count "$jobs" --sandbox-dir "$dir/sandbox" --scale "$scale" --ttl 60 --rate 100 --markers dns-silent || fail "producing jobs failed"
    check --timeout 120 --max-duplicates 0 --expect delivered --rss-pids "$pid_a"
    echo "faults[stalls-silent-dns]: every other target final $(( ($(date +%s%3N) - t0) / 1000 )) s after the first job; DNS timeouts logged: $(grep -c 'DNS lookup of the push service timed out' "$dir/worker-a.log" || true)"
    stop_worker a
    end
}
stalls_flaky_dns() {
    local jobs flaky=127.8.8.9
    jobs=$(scaled 100)
    begin stalls-flaky-dns "$jobs jobs × (APNs, Web Push, proxy); some Web Push endpoints on a host whose name server answers SERVFAIL for 5 s, then resolves"
    # As stalls-silent-dns: the worker's mount namespace sees a resolv.conf naming scripts/flaky-dns.py on loopback.
    printf 'nameserver %s\noptions timeout:1 attempts:1\n' "$flaky" >"$dir/resolv.conf"
    spawn python3 scripts/flaky-dns.py "$flaky" push.dns-flaky.example 127.0.0.1 5 >"$dir/dns.log" 2>&1
    start_kafka; start_sandbox --hostile --server-name push.dns-flaky.example; start_redis
    start_worker_behind_resolver PUSH_MAX_ATTEMPTS=12 PUSH_RETRY_BASE_MS=1000 PUSH_RETRY_MAX_MS=4000
    "$ledger_python" scripts/ledger.py produce-endpoints --brokers "$brokers" --manifest "$dir/manifest" --prefix fd \
        --count "$jobs" --sandbox-dir "$dir/sandbox" --scale "$scale" --ttl 120 --markers dns-flaky || fail "producing jobs failed"
    check --timeout 120 --max-duplicates 0 --expect delivered --rss-pids "$pid_a"
    echo "faults[stalls-flaky-dns]: lookups that failed for now, retried: $(grep -c 'DNS lookup of the push service failed for now' "$dir/worker-a.log" || true)"
    stop_worker a
    end
}
# Latency of each of `count` jobs whose bindings start with `prefix`: its first accepted answer after `t0` (ms).
# Prints: how many within `bound_ms`, how many answered, the median and the slowest (ms).
first_answers_within() {  # record t0 prefix count bound_ms
    python3 - "$@" <<'PY'
import sys
record, t0, prefix, count, bound = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
first = {}
for line in open(record):
    at, target, label = line.split()[:3]
    if target.startswith(prefix) and label.split(":")[-1].startswith("2"):
        first.setdefault(target, int(at) - t0)
latencies = sorted(first.values())
within = sum(1 for l in latencies if l <= bound)
p50 = latencies[len(latencies) // 2] if latencies else None
print(f"{within} {len(latencies)} {p50} {latencies[-1] if latencies else None}")
PY
}

# Waits until `count` targets whose bindings start with `prefix` were answered 2xx, up to 30 s.
wait_for_answers() {  # prefix count
    for _ in $(seq 1 300); do [ "$(grep -c " $1[0-9]* 2" "$dir/record" || true)" -ge "$2" ] && break; sleep 0.1; done
}

stalls_slow_user() {
    local slow others within seen p50 worst t0
    slow=$(scaled 30); others=$(scaled 40)
    begin stalls-slow-user "one user's push service answers after 2 s: $slow of its jobs, then $others jobs of $others other users, PUSH_MAX_IN_FLIGHT=10"
    start_kafka; start_sandbox --slow-prefix su-b- --slow-ms 2000; start_redis
    start_worker a PUSH_MAX_IN_FLIGHT=10; wait_ready a
    produce --prefix su --count "$slow" --users 1 --user-prefix slowuser-
    t0=$(date +%s%3N)
    produce --prefix ot --count "$others"
    wait_for_answers ot-b- "$others"
    read -r within seen p50 worst <<<"$(first_answers_within "$dir/record" "$t0" ot-b- "$others" 10000)"
    echo "faults[stalls-slow-user]: other users delivered within 10 s: $within of $others (answered $seen; p50 ${p50} ms, slowest ${worst} ms)"
    [ "$within" -ge $((others / 2)) ] || fail "only $within of $others other users delivered within 10 s beside one slow user"
    check --timeout 200 --max-duplicates 0 --expect delivered --rss-pids "$pid_a"
    stop_worker a
    end
}

# Several slow users together: their jobs queued behind each running one are bounded by the memory they hold
# (PUSH_MAX_READ_AHEAD_BYTES), not by a count a few users fill, so the lane reads on to the other users' jobs, which
# take the places the slow requests free before the slow users' next jobs do. No urgent reserve: the normal lane
# has all ten places, one per slow user (with the default reserve, half of them, the slow users' first jobs, older
# than the others', take the first two rounds).
stalls_slow_users() {
    local users=10 per_user=10 others within seen p50 worst t0
    others=$(scaled 40)
    begin stalls-slow-users "$users users whose push service answers after 5 s, $per_user jobs each, then $others jobs of $others other users, PUSH_MAX_IN_FLIGHT=10, no urgent reserve"
    start_kafka; start_sandbox --slow-prefix sv-b- --slow-ms 5000; start_redis
    start_worker a PUSH_MAX_IN_FLIGHT=10 PUSH_URGENT_RESERVED_IN_FLIGHT=0; wait_ready a
    produce --prefix sv --count $((users * per_user)) --users "$users" --user-prefix slowusers-
    t0=$(date +%s%3N)
    produce --prefix vo --count "$others"
    wait_for_answers vo-b- "$others"
    read -r within seen p50 worst <<<"$(first_answers_within "$dir/record" "$t0" vo-b- "$others" 10000)"
    echo "faults[stalls-slow-users]: other users delivered within 10 s: $within of $others (answered $seen; p50 ${p50} ms, slowest ${worst} ms)"
    [ "$within" -ge "$others" ] || fail "only $within of $others other users delivered within 10 s beside $users slow users"
    check --timeout 200 --max-duplicates 0 --expect delivered --rss-pids "$pid_a"
    stop_worker a
    end
}

stalls_outage() {
    local jobs
    jobs=$(scaled 200)
    begin stalls-outage "the provider answers 503 to everything for 8 s while $jobs jobs arrive (circuit after 3 failures, 1 s cool-down, 2 slots per app), then recovers"
    start_kafka; start_sandbox --outage-file "$dir/outage" --retry-after 0; start_redis
    touch "$dir/outage"
    start_worker a PUSH_CIRCUIT_FAILURES=3 PUSH_CIRCUIT_COOLDOWN_MS=1000 PUSH_APP_MAX_IN_FLIGHT=2 PUSH_MAX_ATTEMPTS=100; wait_ready a
    produce --prefix ou --count "$jobs" --users 50
    sleep 8
    rm -f "$dir/outage"
    echo "faults[stalls-outage]: provider recovered after $(grep -c ' outage:' "$dir/record" || true) outage answers"
    check --timeout 150 --max-duplicates 0 --expect delivered --rss-pids "$pid_a"
    stop_worker a
    end
}
stalls_leases() {
    local jobs
    jobs=$(scaled 300)
    begin stalls-leases "two workers, retry lease at its lowest (15 s), 2 slots per app, answers stalled 3 s and refused half the time: $jobs jobs"
    start_kafka; start_sandbox --fail-share 0.5 --retry-after 0 --stall-share 0.2 --stall-ms 3000 --max-faults-per-target 3; start_redis
    start_worker a PUSH_RETRY_LEASE_MS=15000 PUSH_APP_MAX_IN_FLIGHT=2 PUSH_MAX_ATTEMPTS=20
    start_worker b PUSH_RETRY_LEASE_MS=15000 PUSH_APP_MAX_IN_FLIGHT=2 PUSH_MAX_ATTEMPTS=20
    wait_ready a; wait_ready b
    produce --prefix le --count "$jobs" --users 100
    check --timeout 300 --max-duplicates 1000 --max-unexplained-duplicates 0 --expect delivered --rss-pids "$pid_a,$pid_b"
    stop_worker a; stop_worker b
    end
}

# Live configuration (docs/configuration.md "Changing apps and credentials without a restart"): PUSH_APPS_FILE in a
# directory laid out as a Kubernetes secret volume (files are links into `..data`, a link to a timestamped directory the
# kubelet swaps), with apps of different teams and keys (`push-worker-dev sandbox --apns-teams`), while APNs jobs flow.
# The sandbox's record names the key id that signed each request.
reload_publish() {  # "<team>:<key index> …" (the apps, key 0 is a team's first key) or "broken": a new version of the volume
    local secret=$dir/secret stamp old
    stamp="..$(date +%Y_%m_%d_%H_%M_%S.%N)"
    old=$(readlink "$secret/..data" 2>/dev/null || true)
    mkdir -p "$secret/$stamp"
    if [ "$1" = broken ]; then
        cp -a "$secret/..data/." "$secret/$stamp/"
        printf '{"apns": [{"bundleId": ' >"$secret/$stamp/apps.json"
    else
        python3 - "$dir/sandbox/apns-teams.json" "$secret" "$secret/$stamp" "$@" <<'PY' || fail "could not write the apps file"
import json, os, shutil, sys
teams, secret, target = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
apps = []
for spec in sys.argv[4:]:
    team, index = (int(n) for n in spec.split(":"))
    key = teams[team - 1]["keys"][index]
    name = os.path.basename(key["keyFile"])
    shutil.copy(key["keyFile"], os.path.join(target, name))
    apps.append({"bundleId": teams[team - 1]["bundleId"], "keyFile": os.path.join(secret, name), "keyId": key["keyId"],
                 "teamId": teams[team - 1]["teamId"]})
json.dump({"apns": apps}, open(os.path.join(target, "apps.json"), "w"), indent=1)
PY
    fi
    # As the kubelet does: the `..data` link replaced in one rename, links for new files, stale links and the old directory removed.
    ln -s "$stamp" "$secret/..data_tmp"
    mv -T "$secret/..data_tmp" "$secret/..data"
    for file in "$secret/$stamp"/*; do ln -sfn "..data/$(basename "$file")" "$secret/$(basename "$file")"; done
    for link in "$secret"/*; do [ -e "$link" ] || rm -f "$link"; done
    [ -z "$old" ] || rm -rf "${secret:?}/$old"
}
metric_sample() {  # name metric [labels]: one sample's value as written (e.g. push_config_reloads_total '{result="failure"}')
    curl -s "http://127.0.0.1:$(eval echo "\$http_port_$1")/metrics" | awk -v s="$2${3:-}" '$1 == s { v = $2 } END { print v }'
}
reload_applied() {  # what version: waits until push_config_version changes from $version; sets applied_at (ms)
    local step
    for step in $(seq 1 $(((reload_s + 5) * 10))); do
        [ "$(metric_sample a push_config_version)" != "$version" ] && break
        sleep 0.1
    done
    applied_at=$(date +%s%3N)
    if [ "$(metric_sample a push_config_version)" = "$version" ]; then
        echo "faults[reload]: the $1 version was not applied within $((reload_s + 5)) s"
        not_applied+=("$1")
    else
        echo "faults[reload]: the $1 version applied within $((step / 10)).$((step % 10)) s"
    fi
    version=$(metric_sample a push_config_version)
}
produce_apns() { "$ledger_python" scripts/ledger.py produce-apns --brokers "$brokers" "$@" || fail "producing jobs failed"; }
signed_by() { awk -v k="$1" '$5 == k' "$dir/record" 2>/dev/null | wc -l; }
scenario_reload() {
    local batch steady reload_s=${FAULTS_RELOAD_S:-1} version applied_at removed_at rotated_at not_applied=() failures
    batch=$(scaled 100); steady=$(scaled 700)
    begin reload "APNs apps of 5 teams in a secret volume (PUSH_APPS_RELOAD_S=$reload_s): add, remove, rotate a key, break, fix, while jobs flow"
    start_kafka; start_sandbox --apns-teams 5; start_redis
    local state=$dir/sandbox app1=com.example.app1 app2=com.example.app2 app3=com.example.app3 app4=com.example.app4 app5=com.example.app5
    reload_publish 1:0 2:0 3:0
    start_worker a PUSH_APPS_FILE="$dir/secret/apps.json" PUSH_APPS_RELOAD_S="$reload_s" PUSH_APNS_HOST=localhost \
        PUSH_APNS_PORT="$(cat "$state/apns-port")" PUSH_APNS_CA_FILE="$state/ca.pem"
    wait_ready a
    version=$(metric_sample a push_config_version)
    # Steady streams through every change: app1 (never changed), app3 (rotated from key 0 to key 1 on the way).
    "$ledger_python" scripts/ledger.py produce-apns --brokers "$brokers" --manifest "$dir/manifest-steady1" --prefix st1 \
        --count "$steady" --rate 30 --apps "$app1" --signers K001000000 --label steady &
    local steady1=$!
    "$ledger_python" scripts/ledger.py produce-apns --brokers "$brokers" --manifest "$dir/manifest-steady3" --prefix st3 \
        --count "$steady" --rate 30 --apps "$app3" --signers K003000000,K003000001 --label steady &
    local steady3=$!
    # app2 before its removal: all answered before the removal, so none of its requests may come after it.
    produce_apns --manifest "$dir/manifest" --prefix r2 --count "$batch" --rate 50 --apps "$app2" --signers K002000000 --label before
    for _ in $(seq 1 300); do [ "$(signed_by K002000000)" -ge "$batch" ] && break; sleep 0.1; done
    [ "$(signed_by K002000000)" -ge "$batch" ] || fail "only $(signed_by K002000000) of $batch app2 jobs reached the provider"
    reload_publish 1:0 2:0 3:0 4:0
    reload_applied added
    produce_apns --manifest "$dir/manifest" --prefix a4 --count "$batch" --rate 50 --apps "$app4" --signers K004000000 --label added
    reload_publish 1:0 3:0 4:0
    reload_applied removed
    removed_at=$applied_at
    produce_apns --manifest "$dir/manifest" --prefix x2 --count "$batch" --rate 50 --apps "$app2" --expect failed \
        --expect-reason "no APNs credentials for app $app2" --signers none --label removed
    reload_publish 1:0 3:1 4:0
    reload_applied rotated
    rotated_at=$applied_at
    produce_apns --manifest "$dir/manifest" --prefix o3 --count "$batch" --rate 50 --apps "$app3" --signers K003000001 --label rotated
    failures=$(metric_sample a push_config_reloads_total '{result="failure"}')
    reload_publish broken
    for _ in $(seq 1 $(((reload_s + 5) * 10))); do
        [ "$(metric_sample a push_config_reloads_total '{result="failure"}')" != "$failures" ] && break
        sleep 0.1
    done
    echo "faults[reload]: broken version: push_config_reloads_total{result=\"failure\"} $failures -> $(metric_sample a push_config_reloads_total '{result="failure"}'), push_config_refused $(metric a push_config_refused)"
    [ "$(metric_sample a push_config_reloads_total '{result="failure"}')" != "$failures" ] || not_applied+=("broken (no failure counted)")
    [ "$(metric_sample a push_config_version)" = "$version" ] || fail "the broken version changed push_config_version"
    # Nothing changed: the apps of the last good version serve, app2 stays removed, app3 signs with its new key.
    produce_apns --manifest "$dir/manifest" --prefix b1 --count "$batch" --rate 50 --apps "$app1,$app4" --label broken
    produce_apns --manifest "$dir/manifest" --prefix b3 --count "$batch" --rate 50 --apps "$app3" --signers K003000001 --label broken
    produce_apns --manifest "$dir/manifest" --prefix b2 --count "$batch" --rate 50 --apps "$app2" --expect failed \
        --expect-reason "no APNs credentials for app $app2" --signers none --label broken
    reload_publish 1:0 3:1 4:0 5:0
    reload_applied fixed
    [ "$(metric a push_config_refused)" = 0 ] || not_applied+=("fixed (push_config_refused still $(metric a push_config_refused))")
    produce_apns --manifest "$dir/manifest" --prefix f5 --count "$batch" --rate 50 --apps "$app5" --signers K005000000 --label fixed
    wait "$steady1" || fail "producing the steady app1 jobs failed"
    wait "$steady3" || fail "producing the steady app3 jobs failed"
    cat "$dir/manifest-steady1" "$dir/manifest-steady3" >>"$dir/manifest"
    # Requests already in flight when a key is rotated out finish on it: 1 s after the version was seen applied.
    check --timeout 120 --max-duplicates 0 --forbid-signer "K002000000@$removed_at" --forbid-signer "K003000000@$((rotated_at + 1000))" \
        --rss-pids "$pid_a"
    echo "faults[reload]: requests signed per key: $(awk 'NF >= 5 { print $5 }' "$dir/record" | sort | uniq -c | awk '{ printf "%s×%s ", $2, $1 }')"
    [ ${#not_applied[@]} -eq 0 ] || fail "versions not taken as they should be: ${not_applied[*]}"
    stop_worker a
    end
}

for scenario in "${scenarios[@]}"; do "scenario_${scenario//-/_}"; done
python3 - "$rows" <<'PY'
import json, sys
print("| scenario | jobs in | final outcomes | lost | duplicates | replays | dead letters | peak RSS (MB) |")
print("|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['scenario']} | {r['jobs_in']} | {r['final_outcomes']} | {r['lost']} | {r['duplicates']} | {r['replays']} | {r['dead_letters']} | {r['peak_rss_mb']} |")
PY
echo "faults: PASS (${scenarios[*]})"

# Shared by the process-level scripts: a scratch directory, background processes that
# are stopped on exit, and the broker, sandboxes and redis-server they run against.
# The sourcing script defines fail().
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-.build/debug/push-worker}
# The development executable (kafka-mock, sandbox, bench) is built beside the production one.
dev_bin=$(dirname "$bin")/push-worker-dev
work=$(mktemp -d)
pids=()
# Stops these processes: a stop signal first, so the sandboxes remove their certificate directories
# (with private keys) from /tmp; whatever still runs 3 s later is killed.
stop_processes() {
    [ $# -gt 0 ] || return 0
    for pid in "$@"; do kill "$pid" 2>/dev/null || true; done
    for _ in $(seq 1 30); do
        local running=0
        for pid in "$@"; do kill -0 "$pid" 2>/dev/null && running=1; done
        [ "$running" = 0 ] && break
        sleep 0.1
    done
    for pid in "$@"; do kill -9 "$pid" 2>/dev/null || true; done
}
cleanup() {
    stop_processes "${pids[@]}"
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
# A throwaway CA (P-256) in DIR: ca.pem and ca-key.pem, named NAME.
make_test_ca() {  # dir name
    mkdir -p "$1"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=$2" \
        -keyout "$1/ca-key.pem" -out "$1/ca.pem" >/dev/null 2>&1 || fail "openssl could not make the CA $2"
}
# A P-256 key and a certificate of DIR's CA with the given X.509 extensions (lines, printf %b): DIR/NAME.pem, NAME-key.pem.
issue_test_certificate() {  # dir name extensions
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$2" -keyout "$1/$2-key.pem" \
        -out "$1/$2.csr" >/dev/null 2>&1 || fail "openssl could not make the $2 key"
    openssl x509 -req -in "$1/$2.csr" -CA "$1/ca.pem" -CAkey "$1/ca-key.pem" -CAcreateserial -days 2 \
        -extfile <(printf '%b\n' "$3") -out "$1/$2.pem" >/dev/null 2>&1 || fail "openssl could not issue the $2 certificate"
}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for_file() { for _ in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.1; done; fail "$1 never appeared"; }
# A free port whose Redis Cluster bus port (+10000) is free too.
free_cluster_port() {
    python3 -c '
import random, socket
while True:
    port = random.randint(20000, 45000)
    try:
        for p in (port, port + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", p)); s.close()
        print(port); break
    except OSError:
        pass'
}
# redis-cli as the Redis helpers below run it: a script whose Redis needs TLS or a user adds those options.
redis_cli=(redis-cli)
# Joins running cluster-enabled redis-servers into one cluster (replicas per master first, then the
# ports) and waits until every node reports cluster_state:ok.
create_redis_cluster() {
    local replicas=$1 port
    shift
    for port in "$@"; do
        for _ in $(seq 1 50); do "${redis_cli[@]}" -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    done
    "${redis_cli[@]}" --cluster create $(printf '127.0.0.1:%s ' "$@") --cluster-replicas "$replicas" --cluster-yes >"$work/cluster-create.log" 2>&1 \
        || fail "redis-cli --cluster create failed: $(tail -n 3 "$work/cluster-create.log")"
    wait_cluster_ok "$@"
}
wait_cluster_ok() {  # ports: every one reports cluster_state:ok
    local port
    for _ in $(seq 1 200); do
        local ok=1
        for port in "$@"; do "${redis_cli[@]}" -p "$port" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || ok=0; done
        [ "$ok" = 1 ] && return 0
        sleep 0.1
    done
    fail "the Redis Cluster did not reach cluster_state:ok"
}

# Starts `push-worker-dev kafka-mock` (topic specs as arguments), `push-worker-dev sandbox` and
# redis-server; sets brokers and redis_port.
start_fixtures() {
    local topics=()
    for spec in "$@"; do topics+=(--topic "$spec"); done
    "$dev_bin" kafka-mock "${topics[@]}" --bootstrap-file "$work/bootstrap" >/dev/null & pids+=($!)
    "$dev_bin" sandbox --state-dir "$work/sandbox" >/dev/null & pids+=($!)
    redis_port=$(free_port)
    redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null & pids+=($!)
    wait_for_file "$work/bootstrap"
    wait_for_file "$work/sandbox/url"
    brokers=$(cat "$work/bootstrap")
}


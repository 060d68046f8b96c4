# Shared by the process-level scripts: a scratch directory, background processes that
# are stopped on exit, and the broker, sandboxes and redis-server they run against.
# The sourcing script defines fail().
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${1:-.build/debug/push-worker}
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for_file() { for _ in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.1; done; fail "$1 never appeared"; }

# Starts `push-worker kafka-mock` (topic specs as arguments), `push-worker sandbox` and
# redis-server; sets brokers and redis_port.
start_fixtures() {
    local topics=()
    for spec in "$@"; do topics+=(--topic "$spec"); done
    "$bin" kafka-mock "${topics[@]}" --bootstrap-file "$work/bootstrap" >/dev/null & pids+=($!)
    "$bin" sandbox --state-dir "$work/sandbox" >/dev/null & pids+=($!)
    redis_port=$(free_port)
    redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null & pids+=($!)
    wait_for_file "$work/bootstrap"
    wait_for_file "$work/sandbox/url"
    brokers=$(cat "$work/bootstrap")
}


#!/usr/bin/env bash
# Calls under a chat backlog: nginx (HTTP/2 over TLS on loopback, answering like every
# provider; bench/nginx.conf), a Kafka mock cluster with the jobs and urgent topics, and
# redis-server; then `push-worker bench --scenario backlog`: N chat jobs queued, a call
# every 100 ms on the urgent lane while they drain. Prints the call latency (Kafka
# timestamp → outcome acknowledged) and the backlog's drain rate. Stops what it started.
#
#   scripts/bench-backlog.sh [--backlog N] [--connections C] [--in-flight N] [--no-build]
set -euo pipefail
backlog=100000 connections=4 build=1 extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --backlog) backlog=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        --in-flight) extra+=("$1" "$2"); shift 2 ;;
        --no-build) build=0; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."
export PATH="$PATH:/opt/swift/usr/bin"
scripts/install-deps.sh --bench
[ "$build" = 1 ] && swift build -c release --product push-worker >&2
fail() { echo "bench: $*" >&2; exit 1; }
source scripts/e2e-lib.sh .build/release/push-worker
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -addext "basicConstraints=critical,CA:TRUE" \
    -keyout "$work/server.key" -out "$work/server.pem" 2>/dev/null
port=$(free_port)
mkdir -p "$work/body"
sed -e "s#@WORK@#$work#g" -e "s#@PORT@#$port#g" bench/nginx.conf > "$work/nginx.conf"
nginx -c "$work/nginx.conf" -e "$work/nginx-error.log" & pids+=($!)
"$bin" kafka-mock --topic push.jobs:32 --topic push.jobs.urgent:8 --topic push.outcomes:8 --topic push.dlq:1 \
    --bootstrap-file "$work/bootstrap" >/dev/null & pids+=($!)
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null & pids+=($!)
wait_for_file "$work/bootstrap"
for _ in $(seq 1 50); do
    curl -sf --http2 --cacert "$work/server.pem" -d '{}' "https://localhost:$port/3/device/be" >/dev/null && break
    sleep 0.1
done
echo "push-worker bench --scenario backlog --backlog $backlog --connections $connections ${extra[*]} ..." >&2
PUSH_KAFKA_BROKERS=$(cat "$work/bootstrap") PUSH_REDIS_URL="redis://127.0.0.1:$redis_port/0" \
    "$bin" bench --scenario backlog --backlog "$backlog" --connections "$connections" "${extra[@]}" \
    --endpoint "https://localhost:$port" --ca-file "$work/server.pem"

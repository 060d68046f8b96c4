#!/usr/bin/env bash
# One command for the throughput ratio: starts nginx (HTTP/2 over TLS on loopback, answering
# like APNs; bench/nginx.conf), a Kafka mock cluster and redis-server; measures h2load against
# nginx, then `push-worker bench` (Kafka in, Redis dedupe, outcomes out) against the same
# endpoint with the same connections, then h2load again; prints both and the ratio
# push-worker / h2load (best h2load run). Stops everything it started.
#
#   scripts/bench.sh [--jobs N] [--connections C] [--mix KIND=W,…] [--in-flight N] [--rate R] [--no-build]
set -euo pipefail
jobs=200000 connections=4 mix=apns-voip=1,apns-alert=3 build=1 extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --jobs) jobs=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        --mix) mix=$2; shift 2 ;;
        --in-flight|--rate) extra+=("$1" "$2"); shift 2 ;;
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
"$bin" kafka-mock --topic push.jobs:32 --topic push.outcomes:8 --topic push.dlq:1 --bootstrap-file "$work/bootstrap" >/dev/null & pids+=($!)
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --loglevel warning >/dev/null & pids+=($!)
wait_for_file "$work/bootstrap"
for _ in $(seq 1 50); do
    curl -sf --http2 --cacert "$work/server.pem" -d '{}' "https://localhost:$port/3/device/be" >/dev/null && break
    sleep 0.1
done

token=be$(printf '%062x' 42)
h2load_run() {
    h2load -n "$jobs" -c "$connections" -m 100 -d bench/apns-body.json \
        -H 'apns-topic: com.example.chat' -H 'apns-push-type: alert' -H 'apns-priority: 10' \
        "https://127.0.0.1:$port/3/device/$token" > "$work/h2load-$1.txt"
    grep -q "$jobs succeeded" "$work/h2load-$1.txt" || { cat "$work/h2load-$1.txt" >&2; fail "h2load run $1 had failures"; }
    grep -oP 'finished in [0-9.]+s, \K[0-9.]+' "$work/h2load-$1.txt"
}
echo "h2load -c $connections -m 100, $jobs POSTs of 300 B to nginx ..." >&2
before=$(h2load_run before)
echo "push-worker bench --jobs $jobs --mix $mix --connections $connections ${extra[*]} ..." >&2
PUSH_KAFKA_BROKERS=$(cat "$work/bootstrap") PUSH_REDIS_URL="redis://127.0.0.1:$redis_port/0" \
    "$bin" bench --jobs "$jobs" --mix "$mix" --connections "$connections" "${extra[@]}" \
    --endpoint "https://localhost:$port" --ca-file "$work/server.pem" --report-file "$work/report.json"
after=$(h2load_run after)
python3 - "$work/report.json" "$before" "$after" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
before, after = float(sys.argv[2]), float(sys.argv[3])
ceiling = max(before, after)
rate = report["jobsPerSecond"]
print()
print(f"h2load (same endpoint, same connections): {before:.0f} req/s before, {after:.0f} req/s after")
print(f"push-worker end to end:                   {rate:.0f} jobs/s")
print(f"ratio push-worker / h2load:               {rate / ceiling:.3f}")
PY

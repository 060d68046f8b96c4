#!/usr/bin/env bash
# Calls under a chat backlog: nginx (HTTP/2 over TLS on loopback, answering like every
# provider; bench/nginx.conf), a Kafka mock cluster with the jobs and urgent topics, and
# redis-server; then `push-worker-dev bench --scenario backlog`: N chat jobs queued, a call
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
source "$(dirname "$0")/bench-lib.sh"
"$dev_bin" kafka-mock --topic push.jobs:32 --topic push.jobs.urgent:8 --topic push.outcomes:8 --topic push.dlq:1 \
    --bootstrap-file "$work/bootstrap" >/dev/null & pids+=($!)
wait_for_file "$work/bootstrap"
echo "push-worker-dev bench --scenario backlog --backlog $backlog --connections $connections ${extra[*]} ..." >&2
env "${bench_log_environment[@]}" \
PUSH_KAFKA_BROKERS=$(cat "$work/bootstrap") PUSH_REDIS_URL="redis://127.0.0.1:$redis_port/0" \
    "$dev_bin" bench --scenario backlog --backlog "$backlog" --connections "$connections" "${extra[@]}" \
    --endpoint "https://localhost:$port" --ca-file "$ca" \
    2> >(split_worker_log "$work/log.jsonl")

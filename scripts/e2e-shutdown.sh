#!/usr/bin/env bash
# Graceful shutdown and hand-over between replicas, as separate processes:
# two `push-worker run` in one group share a stream of jobs; one gets SIGTERM mid-stream.
# It must exit 0 within its grace, the other takes its partitions, and every job ends with
# an outcome — never sent twice (a repeated outcome is the recorded one, byte for byte).
# Then a second SIGTERM must end a worker at once.
source "$(dirname "$0")/e2e-lib.sh"
fail() { echo "shutdown: FAIL: $*" >&2; tail -n 20 "$work"/worker-*.log >&2 || true; exit 1; }

start_fixtures push.jobs:4 push.outcomes:4 push.dlq:1

start_worker() {
    PUSH_KAFKA_BROKERS="$brokers" PUSH_REDIS_URL="redis://127.0.0.1:$redis_port/0" PUSH_HTTP_PORT=0 \
    PUSH_PROXY_URL="$(cat "$work/sandbox/url")" PUSH_PROXY_CA_FILE="$work/sandbox/ca.pem" PUSH_SHUTDOWN_GRACE_S=5 \
    PUSH_RDKAFKA_SESSION_TIMEOUT_MS=6000 PUSH_RDKAFKA_HEARTBEAT_INTERVAL_MS=1000 \
        "$bin" run >"$work/worker-$1.log" 2>&1 &
    pids+=($!)
}
produce() {  # produce N jobs starting at index I
    local now index
    now=$(($(date +%s) * 1000))
    for index in $(seq "$1" $(($1 + $2 - 1))); do
        printf 'user-%s|{"v":1,"id":"s-%s","createdAt":%s,"ttl":300,"kind":"message","userId":"u%s","targets":[{"bindingId":"b-%s","provider":"proxy"}]}\n' \
            "$((index % 50))" "$index" "$now" "$index" "$index"
    done | kcat -P -b "$brokers" -t push.jobs -K '|'
}
# Sends SIGTERM to $1 (twice when $2 is "twice") and waits; sets status and elapsed_ms.
terminate() {
    local started
    started=$(date +%s%N)
    kill -TERM "$1"
    # A worker already gone by the second signal shows in its exit status, checked by the caller.
    if [ "${2:-}" = twice ]; then sleep 0.2; kill -TERM "$1" 2>/dev/null || true; fi
    set +e
    wait "$1"
    status=$?
    set -e
    elapsed_ms=$((($(date +%s%N) - started) / 1000000))
}
count_bindings() {
    kcat -C -b "$brokers" -t push.outcomes -o beginning -e -q -f '%k\t%s\n' >"$work/outcomes" 2>/dev/null || true
    cut -f1 "$work/outcomes" | sort -u | wc -l
}

start_worker a; first=$!
start_worker b; second=$!
produce 0 1000
for _ in $(seq 1 120); do [ "$(count_bindings)" -ge 200 ] && break; sleep 0.5; done
produce 1000 1000

echo "shutdown: SIGTERM to one worker mid-stream"
terminate "$first"
[ "$status" -eq 0 ] || fail "worker exited with $status after SIGTERM"
[ "$elapsed_ms" -le 8000 ] || fail "worker took ${elapsed_ms} ms to stop (grace 5 s)"
grep -q '"msg":"consumer closed"' "$work/worker-a.log" || fail "the stopped worker did not close its consumer"

produce 2000 500
for _ in $(seq 1 240); do [ "$(count_bindings)" -ge 2500 ] && break; sleep 0.5; done
bindings=$(count_bindings)
[ "$bindings" -eq 2500 ] || fail "only $bindings of 2500 jobs have an outcome"
distinct=$(sort -u "$work/outcomes" | cut -f1 | sort | uniq -d | wc -l)
[ "$distinct" -eq 0 ] || fail "$distinct bindings have differing outcomes: a job was sent twice"
repeats=$(($(wc -l <"$work/outcomes") - bindings))
grep -q '"status":"delivered"' "$work/outcomes" || fail "no delivered outcome"
[ "$(grep -vc '"status":"delivered"' "$work/outcomes")" -eq 0 ] || fail "some jobs were not delivered"
echo "shutdown: hand-over complete in ${elapsed_ms} ms; 2500/2500 jobs delivered; ${repeats} outcomes replayed (identical), none sent twice"

echo "shutdown: a second signal exits at once"
start_worker c; third=$!
# Until its normal lane holds partitions of push.jobs (the urgent lane's assignment can come first): otherwise
# the slow jobs below could all stay with worker b and this one would have nothing in flight to cut short.
for _ in $(seq 1 200); do grep -qF '"partitions assigned","partitions":"[push.jobs[' "$work/worker-c.log" && break; sleep 0.1; done
grep -qF '"partitions assigned","partitions":"[push.jobs[' "$work/worker-c.log" || fail "worker c never got partitions of push.jobs"
produce 3000 50
# slow- users keep their jobs in flight for 2 s each
for index in $(seq 3100 3120); do
    printf 'slow-%s|{"v":1,"id":"w-%s","ttl":300,"kind":"message","userId":"slow-%s","targets":[{"bindingId":"w-%s","provider":"proxy"}]}\n' "$index" "$index" "$index" "$index"
done | kcat -P -b "$brokers" -t push.jobs -K '|'
# Signal while the slow jobs are still in flight (they were sent well under a second ago).
sleep 1
terminate "$third" twice
[ "$status" -eq 130 ] || fail "a second signal should exit with 130 at once, got $status"
[ "$elapsed_ms" -le 1500 ] || fail "the second signal took ${elapsed_ms} ms"
kill -TERM "$second"; wait "$second" || fail "the remaining worker did not stop cleanly"
echo "shutdown: PASS"

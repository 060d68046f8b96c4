#!/usr/bin/env bash
# End to end through separate processes: `push-worker-dev kafka-mock` (a Kafka-protocol
# broker), `push-worker-dev sandbox` (an HTTPS push proxy), a real redis-server,
# `push-worker run` configured only by PUSH_* variables, and kcat as an independent
# producer and consumer.
# Usage: scripts/e2e-run.sh [path/to/push-worker] (push-worker-dev is taken from the same folder)
source "$(dirname "$0")/e2e-lib.sh"
fail() { echo "e2e: FAIL: $*" >&2; [ -f "$work/run.log" ] && tail -20 "$work/run.log" >&2; exit 1; }

echo "e2e: --version names the VERSION file's version and the revision"
version=$("$bin" --version)
[[ "$version" =~ ^push-worker\ $(cat VERSION)\ \(([0-9a-f]{12}(-dirty)?|unknown)\)$ ]] || fail "unexpected --version: $version"

echo "e2e: bad configuration stops start-up with one line per problem"
set +e
problems=$(env -i PATH="$PATH" PUSH_PROXY_URL=http://proxy.example.com PUSH_MAX_ATTEMPTS=many "$bin" run 2>&1 >/dev/null)
status=$?
set -e
[ "$status" -eq 2 ] || fail "expected exit status 2 for bad configuration, got $status"
[ "$(printf '%s\n' "$problems" | grep -c '^configuration: ')" -eq 3 ] || fail "expected 3 problem lines, got: $problems"

start_fixtures push.jobs:4 push.outcomes:4 push.dlq:1
http_port=$(free_port)
wait_for_file "$work/sandbox/webpush-subscription.json"
"$bin" vapid-keys --output "$work/vapid.pem" >/dev/null
subscription=$(cat "$work/sandbox/webpush-subscription.json")

now=$(($(date +%s) * 1000))
job='{"v":1,"id":"e2e-1","createdAt":'$now',"ttl":60,"kind":"call","userId":"alice","data":{"callId":"c1"},"targets":[{"bindingId":"e2e-b1","provider":"proxy","token":"secret-voip-token-5f1e9a","tokenType":"apnsVoip","platform":"ios","pushType":"voip"},{"bindingId":"e2e-b2","provider":"proxy","token":"secret-fcm-token-77c2d0","tokenType":"fcm","platform":"android"}]}'
gone='{"v":1,"id":"e2e-2","createdAt":'$now',"kind":"message","userId":"unknown-bob","targets":[{"bindingId":"e2e-b3","provider":"proxy"}]}'
apns='{"v":1,"id":"e2e-3","createdAt":'$now',"ttl":30,"kind":"call","userId":"carol","data":{"callId":"c2"},"targets":[{"bindingId":"e2e-b4","provider":"apns","token":"'$(printf 'ab%.0s' $(seq 32))'","environment":"production"},{"bindingId":"e2e-b5","provider":"apns","token":"0410'$(printf 'cd%.0s' $(seq 30))'"}]}'
fcm='{"v":1,"id":"e2e-4","createdAt":'$now',"ttl":600,"kind":"message","userId":"dave","notification":{"title":"Hi","body":"there"},"targets":[{"bindingId":"e2e-b6","provider":"fcm","token":"fcm-dave-1","platform":"android"},{"bindingId":"e2e-b7","provider":"fcm","token":"unregistered-dave-2"}]}'
web='{"v":1,"id":"e2e-5","createdAt":'$now',"ttl":600,"kind":"message","userId":"erin","notification":{"title":"Hi","body":"browser"},"targets":[{"bindingId":"e2e-b8","provider":"webpush",'${subscription#\{}']}'
hms='{"v":1,"id":"e2e-6","createdAt":'$now',"ttl":30,"kind":"call","userId":"frank","data":{"callId":"c3"},"targets":[{"bindingId":"e2e-b9","provider":"hms","token":"IQAAAACy0-frank-mate"},{"bindingId":"e2e-b10","provider":"hms","app":"104000001","token":"invalid-IQAAAACy0-old"}]}'
printf 'alice|%s\nmallory|{"v":1,"id":\nbob|%s\ncarol|%s\ndave|%s\nerin|%s\nfrank|%s\n' "$job" "$gone" "$apns" "$fcm" "$web" "$hms" \
    | kcat -P -b "$brokers" -t push.jobs -K '|'

PUSH_APNS_KEY_FILE="$work/sandbox/AuthKey_KEYID4APNS.p8" PUSH_APNS_KEY_ID=KEYID4APNS PUSH_APNS_TEAM_ID=TEAM123456 \
PUSH_APNS_BUNDLE_ID=com.example.chat PUSH_APNS_HOST=localhost PUSH_APNS_PORT="$(cat "$work/sandbox/apns-port")" \
PUSH_APNS_CA_FILE="$work/sandbox/ca.pem" \
PUSH_FCM_CREDENTIALS_FILE="$work/sandbox/service-account.json" PUSH_FCM_ENDPOINT="$(cat "$work/sandbox/fcm-url")" \
PUSH_FCM_CA_FILE="$work/sandbox/ca.pem" \
PUSH_HMS_APP_ID=104000001 PUSH_HMS_CLIENT_SECRET_FILE="$work/sandbox/hms-client-secret" PUSH_HMS_CA_FILE="$work/sandbox/ca.pem" \
PUSH_HMS_ENDPOINT="$(cat "$work/sandbox/hms-url")" PUSH_HMS_TOKEN_URL="$(cat "$work/sandbox/hms-url")/oauth2/v3/token" \
PUSH_WEBPUSH_VAPID_KEY_FILE="$work/vapid.pem" PUSH_WEBPUSH_VAPID_SUBJECT=mailto:ops@example.com \
PUSH_WEBPUSH_CA_FILE="$work/sandbox/ca.pem" PUSH_WEBPUSH_ALLOWED_NETWORKS=127.0.0.0/8,::1/128 \
PUSH_WEBPUSH_ALLOWED_PORTS="$(grep -o 'localhost:[0-9]*' "$work/sandbox/webpush-subscription.json" | cut -d: -f2)" \
PUSH_HTTP_PORT="$http_port" PUSH_KAFKA_BROKERS="$brokers" PUSH_REDIS_URL="redis://127.0.0.1:$redis_port/0" PUSH_PROXY_URL="$(cat "$work/sandbox/url")" PUSH_PROXY_CA_FILE="$work/sandbox/ca.pem" \
PUSH_RDKAFKA_SESSION_TIMEOUT_MS=6000 PUSH_RDKAFKA_HEARTBEAT_INTERVAL_MS=1000 PUSH_RDKAFKA_STATISTICS_INTERVAL_MS=500 PUSH_SHUTDOWN_GRACE_S=5 \
    https_proxy=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 no_proxy=localhost,127.0.0.1 ALL_PROXY=http://127.0.0.1:9 all_proxy=http://127.0.0.1:9 \
    "$bin" run >"$work/run.log" 2>&1 &
worker=$!
pids+=($worker)

echo "e2e: waiting for outcomes and the dead letter (read by kcat)"
for _ in $(seq 1 120); do
    kcat -C -b "$brokers" -t push.outcomes -o beginning -e -q -f '%k\t%s\n' >"$work/outcomes" 2>/dev/null || true
    kcat -C -b "$brokers" -t push.dlq -o beginning -e -q -f '%k\t%h\t%s\n' >"$work/dlq" 2>/dev/null || true
    [ "$(wc -l <"$work/outcomes")" -ge 10 ] && [ "$(wc -l <"$work/dlq")" -ge 1 ] && break
    sleep 0.5
done
[ "$(wc -l <"$work/outcomes")" -eq 10 ] || fail "expected 10 outcomes, got: $(cat "$work/outcomes")"
grep -q $'^e2e-b1\t.*"status":"delivered"' "$work/outcomes" || fail "e2e-b1 not delivered"
grep -q $'^e2e-b2\t.*"status":"delivered"' "$work/outcomes" || fail "e2e-b2 not delivered"
grep -q $'^e2e-b3\t.*"status":"rejected".*"action":"remove_binding"' "$work/outcomes" || fail "e2e-b3 not rejected with remove_binding"
grep -q $'^e2e-b4\t.*"provider":"apns".*"status":"delivered".*"providerMessageId":"[0-9a-f-]\\{36\\}"' "$work/outcomes" || fail "APNs VoIP push e2e-b4 not delivered with an apns-id"
grep -q $'^e2e-b6\t.*"provider":"fcm".*"status":"delivered".*"providerMessageId":"projects/example-project/messages/' "$work/outcomes" || fail "FCM push e2e-b6 not delivered with its message name"
grep -q $'^e2e-b7\t.*"status":"rejected".*"action":"remove_binding"' "$work/outcomes" || fail "FCM UNREGISTERED e2e-b7 not rejected with remove_binding"
grep -q $'^e2e-b8\t.*"provider":"webpush".*"status":"delivered".*"httpStatus":201' "$work/outcomes" || fail "Web Push e2e-b8 not delivered"
grep -q $'^e2e-b9\t.*"provider":"hms".*"status":"delivered"' "$work/outcomes" || fail "HMS push e2e-b9 not delivered"
grep -q $'^e2e-b10\t.*"provider":"hms".*"status":"rejected".*"action":"remove_binding"' "$work/outcomes" || fail "HMS invalid token e2e-b10 not rejected with remove_binding"
grep -q $'^e2e-b5\t.*"status":"rejected".*"action":"remove_binding","invalidSince":1795000000000' "$work/outcomes" || fail "APNs 410 e2e-b5 not rejected with invalidSince"
cut -f2 "$work/outcomes" | python3 scripts/check-schemas.py outcome - || fail "outcomes do not match docs/outcome.schema.json"
[ "$(wc -l <"$work/dlq")" -eq 1 ] || fail "expected 1 dead letter, got: $(cat "$work/dlq")"
grep -q $'^mallory\t.*push-dlq-code=invalid_json' "$work/dlq" || fail "dead letter lacks its key or reason: $(cat "$work/dlq")"

kcat -C -b "$brokers" -t push.outcomes -o beginning -e -q -f '%k\t%h\n' >"$work/outcome-headers" 2>/dev/null || true
for header in ce_specversion=1.0 ce_id=delivered/1/5:e2e-1/e2e-b1 ce_source=/push-worker/push-worker \
    ce_type=io.push-worker.outcome.delivered ce_subject=e2e-b1 content-type=application/json ce_time=20; do
    grep $'^e2e-b1\t' "$work/outcome-headers" | cut -f2 | tr ',' '\n' | grep -q "^$header" \
        || fail "the outcome lacks its CloudEvents header $header: $(grep $'^e2e-b1\t' "$work/outcome-headers")"
done
grep $'^e2e-b3\t' "$work/outcome-headers" | grep -q ',ce_type=io.push-worker.outcome.rejected' \
    || fail "the rejected outcome lacks its CloudEvents type: $(grep $'^e2e-b3\t' "$work/outcome-headers")"
grep -q $'^mallory\t.*ce_type=io.push-worker.dead-letter' "$work/dlq" || fail "the dead letter lacks its CloudEvents headers"

echo "e2e: the same job again (a redelivery): outcomes replayed from Redis, not sent again"
printf 'alice|%s\n' "$job" | kcat -P -b "$brokers" -t push.jobs -K '|'
for _ in $(seq 1 60); do
    kcat -C -b "$brokers" -t push.outcomes -o beginning -e -q -f '%k\t%s\n' >"$work/outcomes" 2>/dev/null || true
    [ "$(wc -l <"$work/outcomes")" -ge 12 ] && break
    sleep 0.5
done
[ "$(wc -l <"$work/outcomes")" -eq 12 ] || fail "expected 12 outcomes after the redelivery, got: $(cat "$work/outcomes")"
[ "$(grep -c $'^e2e-b1\t' "$work/outcomes")" -eq 2 ] || fail "e2e-b1 should have two outcomes"
[ "$(grep $'^e2e-b1\t' "$work/outcomes" | sort -u | wc -l)" -eq 1 ] || fail "the redelivered job was sent again (outcomes differ)"

echo "e2e: operations endpoint: readiness, liveness and delivery counters"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port/readyz")" = 200 ] || fail "/readyz is not 200 while consuming"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port/healthz")" = 200 ] || fail "/healthz is not 200"
curl -s "http://127.0.0.1:$http_port/metrics" >"$work/metrics"
grep -q '^push_deliveries_total{provider="apns",app="-",status="delivered"} 1$' "$work/metrics" || fail "metrics lack the APNs delivery: $(grep push_deliveries "$work/metrics")"
grep -q '^push_jobs_invalid_total{code="invalid_json"} 1$' "$work/metrics" || fail "metrics lack the invalid job"
grep -q '^push_build_info{version="'"$(cat VERSION)"'",revision="[0-9a-z-]*"} 1' "$work/metrics" || fail "metrics lack push_build_info"
grep -q '^push_kafka_produce_rtt_p99_seconds{broker="[0-9]*"} [0-9.e+-]*$' "$work/metrics" \
    || fail "metrics lack the outcome producer's round trip: $(grep push_kafka_produce "$work/metrics")"
grep -q '^push_lane_lag_seconds{lane="urgent"} [0-9.e+-]*$' "$work/metrics" || fail "metrics lack the urgent lane's lag: $(grep push_lane_lag "$work/metrics")"
grep -q '^push_store_shared 1' "$work/metrics" || fail "with Redis, push_store_shared is not 1: $(grep push_store_shared "$work/metrics")"
python3 scripts/check-observability.py "$work/metrics" || fail "the chart's alerting rules or dashboard name a metric the worker does not export"

echo "e2e: SIGTERM stops the worker cleanly"
kill -TERM "$worker"
set +e
wait "$worker"
status=$?
set -e
[ "$status" -eq 0 ] || fail "worker exited with $status after SIGTERM"
grep -q '"msg":"push-worker stopped"' "$work/run.log" || fail "no clean-stop log line"
python3 - "$work/run.log" <<'PY' || fail "a log line is not a JSON object with ts, level and msg"
import json, sys
for number, line in enumerate(open(sys.argv[1]), 1):
    record = json.loads(line)
    assert isinstance(record, dict) and {"ts", "level", "msg"} <= record.keys(), f"line {number}: {line}"
PY
# Secrets never reach the logs: device and registration tokens, bearer JWTs, Web Push endpoint paths.
endpoint_path=$(python3 -c 'import json,sys,urllib.parse; print(urllib.parse.urlsplit(json.load(open(sys.argv[1]))["endpoint"]).path)' \
    "$work/sandbox/webpush-subscription.json")
for secret in secret-voip-token-5f1e9a secret-fcm-token-77c2d0 "$(printf 'ab%.0s' $(seq 32))" "0410$(printf 'cd%.0s' $(seq 30))" \
    fcm-dave-1 unregistered-dave-2 "$endpoint_path" IQAAAACy0-frank-mate invalid-IQAAAACy0-old "$(cat "$work/sandbox/hms-client-secret")"; do
    if grep -qF -- "$secret" "$work/run.log"; then fail "a secret appeared in the logs: ${secret:0:6}…"; fi
done
if grep -qE 'eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}' "$work/run.log"; then fail "a JWT appeared in the logs"; fi
echo "e2e: PASS (proxy, APNs, FCM, Web Push and Huawei Push Kit outcomes, a dead egress proxy skipped for the hosts NO_PROXY names (ALL_PROXY ignored), CloudEvents headers, 1 dead letter, alert rules and dashboard checked against /metrics, redelivery replayed from Redis, no secret in the logs, clean SIGTERM)"

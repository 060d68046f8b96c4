#!/usr/bin/env bash
# One command for the throughput ratio: starts nginx (HTTP/2 over TLS on loopback, answering
# like APNs; bench/nginx.conf), a Kafka mock cluster and redis-server; measures h2load against
# nginx, then `push-worker-dev bench` (Kafka in, Redis dedupe, outcomes out) against the same
# endpoint with the same connections, then h2load again; prints both and the ratio
# push-worker / h2load (best h2load run). Stops everything it started.
#
# The default mix is APNs alerts only, the request h2load sends: with all jobs queued first,
# calls (TTL 30 s) at the back of the queue would expire instead of being sent.
# It ends with the micro-benchmarks (`push-worker-dev bench --micro`) beside `openssl speed ecdhp256`.
# With --transports, the worker's HTTP/2 client (nghttp2 framing on swift-nio) runs alone first
# (`bench --scenario transport`: the same POST as h2load, as many in flight).
# With --redis-cluster, the worker uses a local 3-master Redis Cluster instead of one redis-server
# (the Redis figures are then summed over the masters, and listed per master).
# With --baseline BINARY, another build of push-worker-dev (say, of an earlier commit; before the
# development tools had their own executable, push-worker itself) runs first
# with the same options, and the table shows both side by side. With --rounds N (N even) the two
# run N times each after an unreported warm-up run, in the order baseline, default, default,
# baseline, …, so that a machine that slows down (or speeds up) over the series favours neither:
# the table lists every run, then the median of each build and, per round, default CPU ÷ baseline CPU.
# With --beside MIX, the baseline is this build with another mix: `--mix webpush=1 --beside apns-alert=1 --rounds 2`
# prints Web Push beside APNs, and the per-round ratio is Web Push's CPU per job ÷ APNs'.
# With --redis-tls, the baseline is this build against plain Redis (redis://) and the default runs are this build
# against the same redis-server over TLS (rediss://, PUSH_REDIS_CA_FILE; a throwaway CA and server certificate made
# with openssl, clients not asked for one): the per-round ratio is TLS CPU per job ÷ plain, and the difference of the
# medians (TLS − plain) is given in µs. It takes neither --baseline, --beside, --traces, --redis-cluster nor --apps.
# With --apps N, it measures tenants instead (`bench --scenario tenants`): N APNs apps of N teams, each with its
# own signing key, in a PUSH_APPS_FILE; the built-in APNs sandbox (in the worker's process) knowing every key;
# N × J jobs (--jobs-per-app J, default 3) over the apps, then the same jobs to one app; Redis from here, each run
# on an embedded Kafka mock cluster. No h2load: the figure is the ratio to the one-app run.
#
#   scripts/bench.sh --apps N [--jobs-per-app J] [--no-build]
#   scripts/bench.sh [--jobs N] [--connections C] [--mix KIND=W,…] [--in-flight N] [--rate R]
#                    [--transports] [--redis-cluster] [--traces]
#                    [--baseline BINARY | --beside MIX | --redis-tls [--rounds N]] [--no-build]
set -euo pipefail
jobs=200000 connections=4 mix=apns-alert=1 apps="" jobs_per_app=3 build=1 transports=0 redis_cluster=0 baseline="" beside="" redis_tls=0 traces=0 rounds=1 extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --jobs) jobs=$2; shift 2 ;;
        --connections) connections=$2; shift 2 ;;
        --mix) mix=$2; shift 2 ;;
        --apps) apps=$2; shift 2 ;;
        --jobs-per-app) jobs_per_app=$2; shift 2 ;;
        --in-flight|--rate) extra+=("$1" "$2"); shift 2 ;;
        --no-build) build=0; shift ;;
        --transports) transports=1; shift ;;
        --redis-cluster) redis_cluster=1; shift ;;
        --baseline) baseline=$(realpath "$2"); shift 2 ;;
        --beside) beside=$2; shift 2 ;;
        --redis-tls) redis_tls=1; shift ;;
        --traces) traces=1; shift ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
# Refused before the build: each of these would give --redis-tls's baseline or default runs another meaning.
if [ "$redis_tls" = 1 ]; then
    for conflicting in "--baseline:$baseline" "--beside:$beside" "--traces:${traces#0}" "--redis-cluster:${redis_cluster#0}" "--apps:$apps"; do
        [ -z "${conflicting#*:}" ] || {
            echo "bench: --redis-tls compares this build on plain Redis (baseline) with the same over TLS: it cannot take ${conflicting%%:*}" >&2
            exit 2
        }
    done
fi
source "$(dirname "$0")/bench-lib.sh"
if [ -n "$beside" ]; then
    [ -z "$baseline" ] || fail "--beside and --baseline each name the baseline: give one"
    baseline=$dev_bin
fi
# --traces: the default runs export every job's spans over OTLP/HTTP to nginx (bench/nginx.conf); the baseline is
# this build with trace export off, unless --baseline names another.
default_environment=()
if [ "$traces" = 1 ]; then
    [ -n "$beside" ] && fail "--traces and --beside each change the default runs: give one"
    [ -n "$baseline" ] || baseline=$dev_bin
    default_environment=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$otlp_port" OTEL_SERVICE_NAME=push-worker-bench)
fi
# --redis-tls: the default runs reach the same redis-server on its TLS port (bench-lib.sh); the baseline is this build
# on its plain port. redis-cli's statistics go through the plain port.
if [ "$redis_tls" = 1 ]; then
    baseline=$dev_bin
    default_environment=(PUSH_REDIS_URL="rediss://127.0.0.1:$redis_tls_port/0" PUSH_REDIS_CA_FILE="$redis_tls_ca")
fi
if [ -n "$apps" ]; then
    echo "push-worker-dev bench --scenario tenants --apps $apps --jobs-per-app $jobs_per_app ..." >&2
    env "${bench_log_environment[@]}" PUSH_REDIS_URL="redis://127.0.0.1:$redis_port/0" \
        "$dev_bin" bench --scenario tenants --apps "$apps" --jobs-per-app "$jobs_per_app" --report-file "$work/report-tenants.json" \
        2> >(split_worker_log "$work/log-tenants.jsonl")
    exit 0
fi
[[ "$rounds" =~ ^[1-9][0-9]?$ ]] && { [ "$rounds" = 1 ] || [ $((rounds % 2)) = 0 ]; } \
    || fail "--rounds takes an even number from 2 to 98 (each build goes first in half of the rounds)"
[ "$rounds" = 1 ] || [ -n "$baseline" ] || fail "--rounds compares two builds: it needs --baseline"
# The Kafka mock keeps about 5 MiB per partition (older messages fall off): queued all
# at once, more than ~300 000 jobs on 32 partitions would lose their oldest before the run starts.
if [ "$jobs" -gt 300000 ] && [[ " ${extra[*]} " != *" --rate "* ]]; then
    fail "more than 300000 jobs need --rate R (produced during the run): the Kafka mock keeps only ~5 MiB per partition"
fi

token=be$(printf '%062x' 42)
h2load_run() {
    h2load -n "$jobs" -c "$connections" -m 100 -d bench/apns-body.json \
        -H 'apns-topic: com.example.chat' -H 'apns-push-type: alert' -H 'apns-priority: 10' \
        "https://127.0.0.1:$port/3/device/$token" > "$work/h2load-$1.txt"
    grep -q "$jobs succeeded" "$work/h2load-$1.txt" || { cat "$work/h2load-$1.txt" >&2; fail "h2load run $1 had failures"; }
    grep -oP 'finished in [0-9.]+m?s, \K[0-9.]+' "$work/h2load-$1.txt"
}
echo "h2load -c $connections -m 100, $jobs POSTs of 300 B to nginx ..." >&2
before=$(h2load_run before)
redis_ports=("$redis_port")
redis_url="redis://127.0.0.1:$redis_port/0"
if [ "$redis_cluster" = 1 ]; then
    redis_ports=()
    for _ in 1 2 3; do
        cluster_port=$(free_cluster_port)
        mkdir -p "$work/redis-cluster/$cluster_port"
        redis-server --port "$cluster_port" --bind 127.0.0.1 --dir "$work/redis-cluster/$cluster_port" --cluster-enabled yes \
            --cluster-config-file nodes.conf --save "" --appendonly no --loglevel warning >/dev/null & pids+=($!)
        redis_ports+=("$cluster_port")
    done
    create_redis_cluster 0 "${redis_ports[@]}"
    redis_url="redis://$(printf '127.0.0.1:%s,' "${redis_ports[@]}" | sed 's/,$//')/0"
fi
# One push-worker run on a fresh Kafka mock cluster; $1 names the report, $2 is the binary, the rest is the environment.
bench_run() {
    local label=$1 binary=$2 run_mix=$mix; shift 2
    if [ -n "$beside" ] && [[ "$label" == baseline* ]]; then run_mix=$beside; fi
    rm -f "$work/bootstrap"
    "$dev_bin" kafka-mock --topic push.jobs:32 --topic push.outcomes:8 --topic push.dlq:1 --bootstrap-file "$work/bootstrap" >/dev/null &
    local kafka=$!
    pids+=($kafka)
    wait_for_file "$work/bootstrap"
    echo "push-worker-dev bench ($label) --jobs $jobs --mix $run_mix --connections $connections ${extra[*]} ..." >&2
    local cpu_before="" node
    for node in "${redis_ports[@]}"; do
        redis-cli -p "$node" config resetstat >/dev/null
        cpu_before+=$(redis-cli -p "$node" info cpu | tr -d '\r' | sed -n 's/^used_cpu_\(sys\|user\):/before_&/p')$'\n'
    done
    # The run's own environment last: it may name another PUSH_REDIS_URL (--redis-tls).
    env "${bench_log_environment[@]}" PUSH_KAFKA_BROKERS="$(cat "$work/bootstrap")" PUSH_REDIS_URL="$redis_url" "$@" \
        "$binary" bench --jobs "$jobs" --mix "$run_mix" --connections "$connections" "${extra[@]}" \
        --endpoint "https://localhost:$port" --ca-file "$ca" --report-file "$work/report-$label.json" \
        2> >(split_worker_log "$work/log-$label.jsonl")
    # What Redis did for the run: commands, bytes and CPU (the scale plan's per-job figures).
    for node in "${redis_ports[@]}"; do
        echo "# node $node"
        redis-cli -p "$node" info commandstats; redis-cli -p "$node" info stats; redis-cli -p "$node" info cpu
        redis-cli -p "$node" info memory | grep '^used_memory:'; echo "keys:$(redis-cli -p "$node" dbsize)"
        # What stays once the dedupe claims (`push:{<tag>}d…`, for their window) are gone: records and marks.
        redis-cli -p "$node" --scan --pattern 'push:{*}d*' | xargs -r -n 1000 redis-cli -p "$node" del >/dev/null
        redis-cli -p "$node" info memory | sed -n 's/^used_memory:/kept_memory:/p'
    done | tr -d '\r' >"$work/redis-$label.txt"
    echo "$cpu_before" >>"$work/redis-$label.txt"
    kill "$kafka"
    for node in "${redis_ports[@]}"; do redis-cli -p "$node" flushall >/dev/null; done
}
# The HTTP/2 client alone.
transport_reports=()
if [ "$transports" = 1 ]; then
    echo "push-worker-dev bench --scenario transport --jobs $jobs --connections $connections ..." >&2
    "$dev_bin" bench --scenario transport --jobs "$jobs" --connections "$connections" \
        --endpoint "https://localhost:$port" --ca-file "$ca" --report-file "$work/transport-nghttp2.json" >/dev/null
    transport_reports+=("$work/transport-nghttp2.json")
fi
reports=()
if [ "$rounds" -gt 1 ]; then
    # The first run on a fresh set of servers tends to be the fastest, and a busy machine drifts over a
    # series: a warm-up run goes unreported, and each build goes first in half of the rounds.
    bench_run warm-up "$dev_bin" >/dev/null
    for round in $(seq 1 "$rounds"); do
        if [ $((round % 2)) = 1 ]; then order=(baseline default); else order=(default baseline); fi
        for label in "${order[@]}"; do
            if [ "$label" = baseline ]; then
                bench_run "baseline-$round" "$baseline"
            else
                bench_run "default-$round" "$dev_bin" "${default_environment[@]}"
            fi
            reports+=("$work/report-$label-$round.json")
        done
    done
else
    if [ -n "$baseline" ]; then
        bench_run baseline "$baseline"
        reports+=("$work/report-baseline.json")
    fi
    bench_run default "$dev_bin" "${default_environment[@]}"
    reports+=("$work/report-default.json")
fi
after=$(h2load_run after)
echo "push-worker-dev bench --micro; openssl speed ecdhp256 ..." >&2
"$dev_bin" bench --micro --json > "$work/micro.json"
openssl speed -seconds 3 ecdhp256 2>/dev/null | awk '/nistp256/ {print $NF}' > "$work/ecdh.txt"
legend=""
[ -z "$beside" ] || legend="default: --mix $mix; baseline: --mix $beside (the same build)"
[ "$traces" = 0 ] || legend="default: traces exported over OTLP/HTTP (every job sampled); baseline: trace export off"
[ "$redis_tls" = 0 ] || legend="default: Redis over TLS (rediss://); baseline: plain Redis (the same build)"
BENCH_LEGEND="$legend" python3 - "$work/micro.json" "$(cat "$work/ecdh.txt")" "$before" "$after" "${transport_reports[@]}" -- "${reports[@]}" <<'PY'
import json, os, sys
micro, ecdh = json.load(open(sys.argv[1])), float(sys.argv[2])
separator = sys.argv.index("--")
transport_paths, sys.argv = sys.argv[5:separator], sys.argv[:5] + sys.argv[separator + 1:]
print()
for result in micro:
    line = f"{result['name']:<55} {result['operationsPerSecond']:>12.0f}/s {result['microsecondsPerOperation']:>9.2f} µs"
    if result.get("reference"):
        line += f"   ({result['reference']}: {result['referencePerSecond']:.0f}/s)"
    print(line)
    if result["name"].startswith("Web Push"):
        webpush = result["operationsPerSecond"]
print(f"openssl speed ecdhp256 (one core): {ecdh:.0f} op/s; one Web Push encryption takes {ecdh / webpush:.2f} ECDH operations' time")
sys.argv[1:] = sys.argv[3:]
before, after = float(sys.argv[1]), float(sys.argv[2])
ceiling = max(before, after)
print()
print(f"h2load (same endpoint, same connections): {before:.0f} req/s before, {after:.0f} req/s after")
print()
if transport_paths:
    print(f"{'HTTP/2 client alone':<44} {'req/s':>9} {'÷ h2load':>9} {'CPU µs/req':>11} {'peak RSS MB':>12}")
    for path in transport_paths:
        report = json.load(open(path))
        label = path.rsplit("transport-", 1)[-1].removesuffix(".json")
        rate = report["requestsPerSecond"]
        print(f"{label + ' (' + report['client'] + ')':<44} {rate:>9.0f} {rate / ceiling:>9.3f} "
              f"{report['cpuMicrosecondsPerRequest']:>11.1f} {report['peakResidentMB']:>12.0f}")
    print()
# cores: busy while the jobs flowed, the worker's and the whole machine's (Redis, nginx and Kafka run here too).
# empty: with every job queued first, the share of the time jobs flowed with none in the pipeline (the consumer ran dry).
# allocs/job: heap allocations per job of the worker (jemalloc's counters; blank for a build that does not report them).
def allocations(report):
    value = report.get("allocationsPerJob")
    return f"{value:>11.0f}" if value is not None else f"{'':>11}"
if os.environ.get("BENCH_LEGEND"):
    print(os.environ["BENCH_LEGEND"])
print(f"{'run':<44} {'jobs/s':>9} {'÷ h2load':>9} {'CPU µs/job':>11} {'allocs/job':>11} {'peak RSS MB':>12} {'e2e p99 ms':>11} {'cores worker/machine':>21} {'empty':>8}")
for path in sys.argv[3:]:
    report = json.load(open(path))
    rate = report["jobsPerSecond"]
    label = path.rsplit("report-", 1)[-1].removesuffix(".json")
    client = report["transport"].split()[0] if report["transport"].startswith("libcurl") else report["transport"].split(" (fallback")[0]
    print(f"{label + ' (' + client + ')':<44} {rate:>9.0f} {rate / ceiling:>9.3f} {report['cpuSecondsPer1000Jobs'] * 1000:>11.0f} "
          f"{allocations(report)} {report['peakResidentMB']:>12.0f} {report['endToEndLatencyMs']['p99']:>11.1f} "
          f"{report.get('processCores', 0):>9.2f} / {report.get('machineBusyCores', 0):.2f} of {report.get('machineCores', 0):.0f}"
          f"{'' if report.get('emptyPipelineShare') is None else ' ' + format(report['emptyPipelineShare'] * 100, '>5.0f') + ' %'}")
rounds = {}
for path in sys.argv[3:]:
    label = path.rsplit("report-", 1)[-1].removesuffix(".json")
    build, _, round_number = label.rpartition("-")
    if build in ("baseline", "default") and round_number.isdigit():
        rounds.setdefault(build, {})[int(round_number)] = json.load(open(path))
if len(rounds) == 2:
    import statistics
    print()
    for build in ("baseline", "default"):
        runs = list(rounds[build].values())
        median = lambda key: statistics.median(run[key] for run in runs)
        print(f"{'median of ' + str(len(runs)) + ' (' + build + ')':<44} {median('jobsPerSecond'):>9.0f} {median('jobsPerSecond') / ceiling:>9.3f} "
              f"{median('cpuSecondsPer1000Jobs') * 1000:>11.0f} "
              f"{allocations({'allocationsPerJob': statistics.median(run['allocationsPerJob'] for run in runs) if all(run.get('allocationsPerJob') is not None for run in runs) else None})} "
              f"{median('peakResidentMB'):>12.0f} "
              f"{statistics.median(run['endToEndLatencyMs']['p99'] for run in runs):>11.1f}")
    ratios = [rounds["default"][n]["cpuSecondsPer1000Jobs"] / rounds["baseline"][n]["cpuSecondsPer1000Jobs"]
              for n in sorted(rounds["default"]) if n in rounds["baseline"]]
    print(f"{'CPU per job, default ÷ baseline, per round':<44} " + " ".join(f"{ratio:.3f}" for ratio in ratios)
          + f"  (median {statistics.median(ratios):.3f})")
    medians = {build: statistics.median(run["cpuSecondsPer1000Jobs"] for run in rounds[build].values()) * 1000
               for build in ("baseline", "default")}
    print(f"{'CPU per job, default − baseline, medians':<44} {medians['default'] - medians['baseline']:+.1f} µs")
print()
# reads: the socket reads Redis served, about one per round trip (the commands of many jobs share one).
# memory B: Redis's used_memory right after the run; kept B: once the dedupe claims are deleted (records and marks).
print(f"{'Redis per job':<44} {'commands':>9} {'reads':>7} {'bytes in':>9} {'bytes out':>10} {'CPU µs':>8} {'memory B':>9} {'kept B':>7}  commands by name")
for path in sys.argv[3:]:
    report = json.load(open(path))
    label = path.rsplit("report-", 1)[-1].removesuffix(".json")
    stats = {}
    calls = {}
    per_node = []
    try:
        lines = open(path.replace("report-", "redis-").replace(".json", ".txt")).read().splitlines()
    except OSError:
        continue
    for line in lines:
        if line.startswith("# node "):
            per_node.append(0)
        elif line.startswith("cmdstat_"):
            name, fields = line[len("cmdstat_"):].split(":", 1)
            count = int(dict(f.split("=") for f in fields.split(","))["calls"])
            calls[name] = calls.get(name, 0) + count
            if per_node:
                per_node[-1] += count
        elif ":" in line and not line.startswith("#"):
            key, value = line.split(":", 1)
            try:
                stats[key] = stats.get(key, 0) + float(value)
            except ValueError:
                pass
    jobs = max(report["jobsFinished"], 1)
    cpu = sum(stats.get(key, 0) - stats.get("before_" + key, 0) for key in ("used_cpu_sys", "used_cpu_user"))
    by_name = ", ".join(f"{name} {count / jobs:.2f}" for name, count in sorted(calls.items(), key=lambda item: -item[1]) if count / jobs >= 0.01)
    print(f"{label:<44} {sum(calls.values()) / jobs:>9.2f} {stats.get('total_reads_processed', 0) / jobs:>7.3f} {stats.get('total_net_input_bytes', 0) / jobs:>9.0f} "
          f"{stats.get('total_net_output_bytes', 0) / jobs:>10.0f} {cpu * 1e6 / jobs:>8.1f} {stats.get('used_memory', 0) / jobs:>9.0f} "
          f"{stats.get('kept_memory', 0) / jobs:>7.0f}  {by_name}")
    print(f"{'  keys left after the run':<44} {stats.get('keys', 0):.0f} (used_memory {stats.get('used_memory', 0) / 1e6:.1f} MB)")
    if len(per_node) > 1:
        print(f"{'  commands per master':<44} " + " / ".join(f"{count / jobs:.2f}" for count in per_node))
PY

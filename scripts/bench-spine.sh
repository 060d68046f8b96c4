#!/usr/bin/env bash
# The pipeline alone, this build beside another: `push-worker-dev bench --scenario spine` (an in-memory log and
# stores, a provider that answers at once) for --baseline BINARY and for this build, in rounds whose order alternates
# (baseline, this, this, baseline, …, after an unreported warm-up) so that a machine that drifts favours neither. The
# table lists every run, then each build's median CPU and allocations per job and, per round, this build's CPU ÷ the
# baseline's. Nothing else is started: no Kafka, Redis or provider. With --pin every run is bound to one core
# (taskset -c 0): the pipeline's threads then share it, which steadies the figures within a series (the hand-offs
# between threads cost what they cost on one core, not two).
#
#   scripts/bench-spine.sh --baseline BINARY [--rounds N] [--jobs N] [--mix KIND=W,…] [--pin] [--no-build]
set -euo pipefail
jobs=200000 rounds=6 baseline="" pin=0 build=1 mix=()
while [ $# -gt 0 ]; do
    case "$1" in
        --baseline) baseline=$(realpath "$2"); shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --mix) mix=(--mix "$2"); shift 2 ;;
        --pin) pin=1; shift ;;
        --no-build) build=0; shift ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
[ -n "$baseline" ] && [ -x "$baseline" ] || { echo "bench-spine: --baseline BINARY (another push-worker-dev build) is required" >&2; exit 2; }
cd "$(dirname "$0")/.."
export PATH="$PATH:/opt/swift/usr/bin"
if [ "$build" = 1 ]; then swift build -c release --product push-worker-dev >&2; fi
dev_bin=$(realpath .build/release/push-worker-dev)
pinning=()
if [ "$pin" = 1 ]; then pinning=(taskset -c 0); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

run() {  # label round binary
    env -u PUSH_REDIS_URL -u PUSH_KAFKA_BROKERS "${pinning[@]}" "$3" bench --scenario spine --jobs "$jobs" "${mix[@]}" \
        --report-file "$work/$1-$2.json" >/dev/null 2>&1 || { echo "bench-spine: the $1 run of round $2 failed" >&2; exit 1; }
}
echo "push-worker-dev bench --scenario spine --jobs $jobs ${mix[*]}: $rounds rounds${pinning[*]:+, pinned to one core}" >&2
run warm-up 0 "$dev_bin"
for round in $(seq 1 "$rounds"); do
    if [ $((round % 2)) = 1 ]; then
        run baseline "$round" "$baseline"
        run default "$round" "$dev_bin"
    else
        run default "$round" "$dev_bin"
        run baseline "$round" "$baseline"
    fi
done

python3 - "$work" "$rounds" <<'PY'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
runs = {(label, r): json.load(open(f"{work}/{label}-{r}.json")) for label in ("baseline", "default") for r in range(1, rounds + 1)}
print(f"{'run':<16}{'jobs/s':>10}{'CPU µs/job':>12}{'allocs/job':>12}")
for r in range(1, rounds + 1):
    for label in (("baseline", "default") if r % 2 else ("default", "baseline")):
        run = runs[(label, r)]
        print(f"{label + '-' + str(r):<16}{run['jobsPerSecond']:>10.0f}{run['cpuMicrosecondsPerJob']:>12.1f}{run['allocationsPerJob']:>12.1f}")
for label in ("baseline", "default"):
    cpu = statistics.median(runs[(label, r)]["cpuMicrosecondsPerJob"] for r in range(1, rounds + 1))
    allocations = statistics.median(runs[(label, r)]["allocationsPerJob"] for r in range(1, rounds + 1))
    print(f"{'median (' + label + ')':<16}{'':>10}{cpu:>12.1f}{allocations:>12.1f}")
ratios = [runs[("default", r)]["cpuMicrosecondsPerJob"] / runs[("baseline", r)]["cpuMicrosecondsPerJob"] for r in range(1, rounds + 1)]
print("CPU per job, default ÷ baseline, per round  " + " ".join(f"{x:.3f}" for x in ratios) + f"  (median {statistics.median(ratios):.3f})")
PY

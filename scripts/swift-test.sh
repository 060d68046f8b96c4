#!/usr/bin/env bash
# Runs the Swift tests (`swift test --skip-build` plus any arguments given) within a time limit.
# A run that goes past it is stopped, with every process it started, and the tests that started and
# never finished are listed: a hang reports where it is instead of running until CI gives up.
#
#   PUSH_TEST_TIME_LIMIT   seconds (default 1200; a whole run takes about 100 s on 2 cores)
set -uo pipefail
cd "$(dirname "$0")/.."
limit=${PUSH_TEST_TIME_LIMIT:-1200}
# When a test crashes, the runtime's crash reporter stops every thread until it has written its
# report; for the hundreds of threads of a test run that took minutes. The crashed thread is enough.
export SWIFT_BACKTRACE=${SWIFT_BACKTRACE:-enable=yes,interactive=no,threads=crashed}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# timeout puts the run in a process group of its own and signals the whole group: the test process
# and the redis-server processes it started.
timeout --kill-after=30 "$limit" swift test --skip-build "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
    echo >&2; echo "swift test did not finish within $limit s (PUSH_TEST_TIME_LIMIT); started and not finished:" >&2
    python3 - "$log" >&2 <<'EOF'
import re, sys
started, finished = [], set()
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if m := re.match(r'◇ Test "(.*)" started\.$', line.rstrip("\n")):
        started.append(m.group(1))
    elif m := re.match(r'[✔✘] Test "(.*)" (with \d+ test cases? )?(passed|failed) after', line):
        finished.add(m.group(1))
for name in started:
    if name not in finished:
        print(f"  {name}")
EOF
fi
exit "$status"

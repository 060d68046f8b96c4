#!/usr/bin/env bash
# Keeps the development tools out of the production path: the PushWorker library and the push-worker
# executable must not depend, directly or through other targets of this package, on PushSandbox (or a
# plugin's sandbox), PushKafkaMock, PushInMemoryKafka, PushDevelopmentTools or PushBench (with
# hdrhistogram's Histogram), and no source file of those production targets may import them. Given a
# built push-worker binary, also checks that none of those modules' symbols, nor librdkafka's mock
# cluster, is linked into it (nm, names demangled by `swift demangle`).
# Usage: scripts/check-target-deps.sh [PUSH_WORKER_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-}
development="PushSandbox APNsSandbox FCMSandbox WebPushSandbox ProxySandbox HMSSandbox PushKafkaMock PushInMemoryKafka PushDevelopmentTools PushBench"
production="PushWorker push-worker"
# The source folders of the production targets and of every package target they reach; fails if one is a development tool.
folders=$(swift package dump-package | DEVELOPMENT="$development" PRODUCTION="$production" python3 -c '
import json, os, sys
development = set(os.environ["DEVELOPMENT"].split())
targets = {t["name"]: t for t in json.load(sys.stdin)["targets"]}
roots = os.environ["PRODUCTION"].split()
path, stack = {root: [root] for root in roots}, list(roots)
while stack:
    name = stack.pop()
    for dependency in targets[name]["dependencies"]:
        for kind in ("byName", "target"):
            other = dependency.get(kind, [None])[0]
            if other in targets and other not in path:
                path[other] = path[name] + [other]
                stack.append(other)
bad = sorted(development & set(path))
for name in bad:
    print(path[name][0] + " depends on a development tool: " + " -> ".join(path[name]), file=sys.stderr)
if bad:
    sys.exit(1)
print("\n".join(targets[name].get("path") or "Sources/" + name for name in sorted(path)))
')
pattern="^\s*(@testable\s+)?import\s+($(tr ' ' '|' <<<"$development Histogram"))\b"
if grep -rnE "$pattern" $folders; then
    echo "a production target (PushWorker, push-worker or one of their dependencies) imports a development tool" >&2
    exit 1
fi
echo "target deps: PushWorker, push-worker and the $(wc -l <<<"$folders") targets they reach (themselves included) use no development tools"
[ -n "$binary" ] || exit 0
# Demangled, a Swift name starts with its module (`PushSandbox.SandboxServer…`; `Prometheus.Histogram` is not hdrhistogram's
# module); the mock cluster is librdkafka's rd_kafka_mock_*.
symbols=$(nm "$binary" | swift demangle --compact | grep -E "(^|[^A-Za-z0-9_.])($(tr ' ' '|' <<<"$development Histogram"))\.|rd_kafka_mock_" || true)
if [ -n "$symbols" ]; then
    echo "$binary links development tools' symbols ($(wc -l <<<"$symbols")), e.g.:" >&2
    head -5 <<<"$symbols" >&2
    exit 1
fi
echo "symbols: $binary links no sandbox, mock cluster, in-memory Kafka, demo or bench symbol ($(nm "$binary" | wc -l) symbols read)"

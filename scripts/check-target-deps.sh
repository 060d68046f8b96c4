#!/usr/bin/env bash
# Keeps the development tools out of the production path: the PushWorker library target must not
# depend, directly or through other targets of this package, on PushSandbox (or a plugin's sandbox), PushKafkaMock, PushInMemoryKafka,
# PushDevelopmentTools or PushBench, and no source file of those production targets may import them.
# Usage: scripts/check-target-deps.sh
set -euo pipefail
cd "$(dirname "$0")/.."
development="PushSandbox APNsSandbox FCMSandbox WebPushSandbox ProxySandbox HMSSandbox PushKafkaMock PushInMemoryKafka PushDevelopmentTools PushBench"
# The source folders of PushWorker and of every package target it reaches; fails if one is a development tool.
folders=$(swift package dump-package | DEVELOPMENT="$development" python3 -c '
import json, os, sys
development = set(os.environ["DEVELOPMENT"].split())
targets = {t["name"]: t for t in json.load(sys.stdin)["targets"]}
path, stack = {"PushWorker": ["PushWorker"]}, ["PushWorker"]
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
    print("PushWorker depends on a development tool: " + " -> ".join(path[name]), file=sys.stderr)
if bad:
    sys.exit(1)
print("\n".join(targets[name].get("path") or "Sources/" + name for name in sorted(path)))
')
pattern="^\s*(@testable\s+)?import\s+($(tr ' ' '|' <<<"$development"))\b"
if grep -rnE "$pattern" $folders; then
    echo "a production target (PushWorker or one of its dependencies) imports a development tool" >&2
    exit 1
fi
echo "target deps: PushWorker and the $(wc -l <<<"$folders") targets it reaches (itself included) use no development tools"

#!/usr/bin/env python3
"""Lints charts/push-worker with Helm's own library (PyPI helm-sdkpy, Helm v4's Lint
action), once with its values and once with every optional part switched on."""
import asyncio
import pathlib
import shutil
import sys
import tempfile

import helm_sdkpy

chart = pathlib.Path(__file__).resolve().parent.parent / "charts" / "push-worker"
toggles = {
    "serviceMonitor:\n  enabled: false": "serviceMonitor:\n  enabled: true",
    "autoscaling:\n  enabled: false": "autoscaling:\n  enabled: true",
    "keda:\n    enabled: false": "keda:\n    enabled: true",
    "secretEnv: {}": "secretEnv:\n  PUSH_REDIS_URL:\n    secret: push-worker-redis\n    key: url",
    "credentials: []": "credentials:\n  - name: apns\n    secret: push-worker-apns\n    mountPath: /secrets/apns",
}


def lint(path):
    result = asyncio.run(helm_sdkpy.Lint(helm_sdkpy.Configuration()).run(str(path)))
    # Helm's lint severities: 1 info, 2 warning, 3 error. The Go errors serialize without text,
    # so the path of each finding is what can be reported.
    findings = [m for m in result.get("Messages") or [] if m.get("Severity", 0) >= 2]
    failed = bool(result.get("Errors")) or bool(findings)
    return failed, [f"{m.get('Path')} (severity {m.get('Severity')})" for m in findings]


def main():
    problems = []
    failed, result = lint(chart)
    if failed:
        problems.append(f"default values: {result}")
    with tempfile.TemporaryDirectory() as directory:
        copy = pathlib.Path(directory) / "push-worker"
        shutil.copytree(chart, copy)
        values = (copy / "values.yaml").read_text()
        for old, new in toggles.items():
            if old not in values:
                problems.append(f"values.yaml no longer contains {old!r}")
            values = values.replace(old, new)
        (copy / "values.yaml").write_text(values)
        failed, result = lint(copy)
        if failed:
            problems.append(f"all options on: {result}")
    for problem in problems:
        print(problem)
    print("chart: lint clean" if not problems else "chart: lint FAILED")
    sys.exit(1 if problems else 0)


main()

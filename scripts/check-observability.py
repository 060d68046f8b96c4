#!/usr/bin/env python3
"""Checks the alerting rules and the dashboard the chart ships (charts/push-worker/files/) against a running
worker: `promtool check rules` accepts the rules file, `promtool test rules` passes its unit tests
(Tests/Observability/prometheus-rules-test.yaml), and every metric a rule or a dashboard panel names is
one the worker exports, in a /metrics scrape given as the argument (scripts/e2e-run.sh passes the one it takes
after its jobs went through). A histogram's _bucket, _sum and _count series count as its family's. Every alert links
its runbook, a section of docs/operations.md named after it; the worker exports no metric in milliseconds and no
`quantile` label outside a summary (Prometheus's base units and label conventions)."""
import json
import pathlib
import re
import subprocess
import sys

import yaml

root = pathlib.Path(__file__).resolve().parent.parent
files = root / "charts" / "push-worker" / "files"
rules_tests = root / "Tests" / "Observability" / "prometheus-rules-test.yaml"
rules_file = files / "prometheus-rules.yaml"
dashboard_file = files / "grafana-dashboard.json"
operations = root / "docs" / "operations.md"
runbook_base = "https://github.com/push-worker/push-worker/blob/main/docs/operations.md#"
metric_name = re.compile(r"\bpush_[a-z0-9_]+")


def exported(scrape):
    """Families in a Prometheus text exposition: each TYPE line, and each sample's name."""
    families = set()
    for line in scrape.splitlines():
        if line.startswith("# TYPE "):
            families.add(line.split()[2])
        elif line and not line.startswith("#"):
            families.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return families


def family(name, families):
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return name[: -len(suffix)]
    return name


def named_in_rules():
    names = {}
    for group in yaml.safe_load(rules_file.read_text())["groups"]:
        for rule in group["rules"]:
            for name in metric_name.findall(rule["expr"]):
                names.setdefault(name, []).append(f"rule {rule.get('alert') or rule.get('record')}")
    return names


def named_in_dashboard():
    names = {}
    dashboard = json.loads(dashboard_file.read_text())
    panels = list(dashboard["panels"])
    while panels:
        panel = panels.pop()
        panels += panel.get("panels", [])
        for target in panel.get("targets", []):
            for name in metric_name.findall(target.get("expr", "")):
                names.setdefault(name, []).append(f"panel {panel['title']!r}")
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        text = query.get("query", "") if isinstance(query, dict) else str(query or "")
        for name in metric_name.findall(text):
            names.setdefault(name, []).append(f"variable {variable['name']}")
    return names


def runbook_problems():
    """Each alert's runbook_url is docs/operations.md#<alert name, lower case>, and the page has that section."""
    problems = []
    headings = {line[4:].strip() for line in operations.read_text().splitlines() if line.startswith("### ")}
    for group in yaml.safe_load(rules_file.read_text())["groups"]:
        for rule in group["rules"]:
            alert = rule.get("alert")
            if not alert:
                continue
            url = rule.get("annotations", {}).get("runbook_url")
            if url != runbook_base + alert.lower():
                problems.append(f"alert {alert}: runbook_url is {url!r}, expected {runbook_base + alert.lower()!r}")
            if alert not in headings:
                problems.append(f"alert {alert}: docs/operations.md has no '### {alert}' runbook section")
    return problems


def unit_problems(scrape):
    """No family in milliseconds, no quantile label on anything but a summary."""
    problems = []
    types = {}
    for line in scrape.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            types[name] = kind
    for name in sorted(types):
        if name.endswith("_milliseconds"):
            problems.append(f"{name} is exported in milliseconds; Prometheus metrics are in seconds")
    for line in scrape.splitlines():
        if line and not line.startswith("#") and 'quantile="' in line.split(" ", 1)[0]:
            name = re.split(r"[{ ]", line, maxsplit=1)[0]
            if types.get(name) != "summary":
                problems.append(f"{name} carries a quantile label but is a {types.get(name, 'metric of no TYPE')}, not a summary")
    return sorted(set(problems))


def main():
    if len(sys.argv) != 2:
        raise SystemExit("usage: check-observability.py METRICS_SCRAPE_FILE")
    problems = []
    promtool = subprocess.run(["promtool", "check", "rules", str(rules_file)], capture_output=True, text=True)
    if promtool.returncode != 0:
        problems.append(f"promtool check rules: {promtool.stdout}{promtool.stderr}")
    tests = subprocess.run(["promtool", "test", "rules", rules_tests.name], cwd=rules_tests.parent, capture_output=True, text=True)
    if tests.returncode != 0:
        problems.append(f"promtool test rules: {tests.stdout}{tests.stderr}")
    scrape = pathlib.Path(sys.argv[1]).read_text()
    problems += runbook_problems()
    problems += unit_problems(scrape)
    families = exported(scrape)
    if not any(name.startswith("push_") for name in families):
        problems.append("the scrape holds no push_ metric at all")
    for source, names in (("rules", named_in_rules()), ("dashboard", named_in_dashboard())):
        if not names:
            problems.append(f"the {source} name no metric")
        for name, users in sorted(names.items()):
            if family(name, families) not in families:
                problems.append(f"{name} ({', '.join(sorted(set(users)))}) is not exported by the worker")
    for problem in problems:
        print(problem)
    rules = sum(len(group["rules"]) for group in yaml.safe_load(rules_file.read_text())["groups"])
    print(f"observability: {rules} rules pass promtool's check and unit tests and link their runbooks, every metric they and the dashboard name is exported, in base units"
          if not problems else "observability: FAILED")
    sys.exit(1 if problems else 0)


main()

#!/usr/bin/env python3
"""Lints charts/push-worker with Helm's own library (PyPI helm-sdkpy, Helm v4's Lint
action), once with its values and once with every optional part switched on, then checks
the rendered Deployment and NetworkPolicy against the chart's security rules."""
import asyncio
import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import helm_sdkpy

chart = pathlib.Path(__file__).resolve().parent.parent / "charts" / "push-worker"
toggles = {
    "serviceMonitor:\n  enabled: false": "serviceMonitor:\n  enabled: true",
    "prometheusRule:\n  enabled: false": "prometheusRule:\n  enabled: true",
    "grafanaDashboard:\n  enabled: false": "grafanaDashboard:\n  enabled: true",
    "autoscaling:\n  enabled: false": "autoscaling:\n  enabled: true",
    "keda:\n    enabled: false": "keda:\n    enabled: true",
    "secretEnv: {}": "secretEnv:\n  PUSH_REDIS_URL:\n    secret: push-worker-redis\n    key: url",
    "credentials: []": "credentials:\n  - name: apns\n    secret: push-worker-apns\n    mountPath: /secrets/apns",
    "metricsFrom: []": "metricsFrom:\n    - namespaceSelector:\n        matchLabels:\n          kubernetes.io/metadata.name: monitoring",
    "dnsTo: []": "dnsTo:\n    - ipBlock:\n        cidr: 169.254.20.10/32",
}


def lint(path):
    result = asyncio.run(helm_sdkpy.Lint(helm_sdkpy.Configuration()).run(str(path)))
    # Helm's lint severities: 1 info, 2 warning, 3 error. The Go errors serialize without text,
    # so the path of each finding is what can be reported.
    findings = [m for m in result.get("Messages") or [] if m.get("Severity", 0) >= 2]
    failed = bool(result.get("Errors")) or bool(findings)
    return failed, [f"{m.get('Path')} (severity {m.get('Severity')})" for m in findings]


def rendered(path, manifests):
    """The manifests (template file names without .yaml) as Helm renders them, and the
    values it renders them with (under "values"). helm-sdkpy has no template action, but Lint renders every template and,
    in lint mode, Helm's `fail` logs its message instead of failing: a template added to
    the copy hands each manifest out as JSON through that log line."""
    for name in manifests:
        (path / "templates" / f"render-{name}.yaml").write_text(
            f'{{{{- fail (printf "rendered {name} %s" (include (print $.Template.BasePath "/{name}.yaml") . | fromYaml | toJson)) }}}}\n')
    (path / "templates" / "render-values.yaml").write_text('{{- fail (printf "rendered values %s" (toJson .Values)) }}\n')
    manifests = [*manifests, "values"]
    script = "import asyncio, helm_sdkpy, sys; asyncio.run(helm_sdkpy.Lint(helm_sdkpy.Configuration()).run(sys.argv[1]))"
    log = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True).stderr
    found = {}
    for quoted in re.findall(r'funcMap fail message=("(?:[^"\\]|\\.)*")', log):
        name, manifest = json.loads(quoted).split(" ", 2)[1:]
        found[name] = json.loads(manifest)
    missing = set(manifests) - set(found)
    if missing:
        raise SystemExit(f"chart: could not render {sorted(missing)}; Helm said: {log[-2000:]}")
    return found


def security_problems(deployment, policy, values):
    """The Deployment mounts no service-account token; the NetworkPolicy denies by default,
    lets in only the metrics port and only from named sources, lets out only DNS and the configured TCP ports, and
    never to link-local addresses."""
    problems = []
    pod = deployment["spec"]["template"]["spec"]
    if pod.get("automountServiceAccountToken") is not False:
        problems.append("the pod spec does not set automountServiceAccountToken: false")
    spec = policy.get("spec", {})
    if sorted(spec.get("policyTypes", [])) != ["Egress", "Ingress"]:
        problems.append(f"NetworkPolicy policyTypes are {spec.get('policyTypes')}, not Ingress and Egress")
    if spec.get("podSelector", {}).get("matchLabels") != deployment["spec"]["selector"]["matchLabels"]:
        problems.append("NetworkPolicy does not select the Deployment's pods")
    ingress_ports = [(port.get("port"), port.get("protocol")) for rule in spec.get("ingress", []) for port in rule.get("ports") or [{}]]
    if ingress_ports != [(values["metricsPort"], "TCP")]:
        problems.append(f"NetworkPolicy ingress allows {ingress_ports}, not only the metrics port")
    for rule in spec.get("ingress", []):
        if not rule.get("from"):
            problems.append("NetworkPolicy lets any source reach the metrics port (an ingress rule without from)")
    policy_values = values["networkPolicy"]
    expected = {(53, "UDP"), (53, "TCP")} | {(port, "TCP") for key in ("httpsPorts", "kafkaPorts", "redisPorts") for port in policy_values[key]}
    egress = spec.get("egress", [])
    egress_ports = {(port.get("port"), port.get("protocol")) for rule in egress for port in rule.get("ports") or [{}]}
    if egress_ports != expected:
        problems.append(f"NetworkPolicy egress allows {sorted(egress_ports, key=str)}, expected {sorted(expected, key=str)}")
    for rule in egress:
        for peer in rule.get("to") or [{}]:
            block = peer.get("ipBlock")
            if block is None:
                problems.append(f"NetworkPolicy egress to {peer or 'every address'} is not an ipBlock that excludes link-local addresses")
            elif block["cidr"] == "0.0.0.0/0" and "169.254.0.0/16" not in block.get("except", []):
                problems.append("NetworkPolicy egress reaches 169.254.0.0/16 (link-local, cloud metadata)")
            elif block["cidr"] == "::/0" and "fe80::/10" not in block.get("except", []):
                problems.append("NetworkPolicy egress reaches fe80::/10 (IPv6 link-local)")
    return problems


def keda_problems(scaled_object, values):
    """KEDA scales on the lag of both lanes: the jobs topic in the worker's group, the urgent topic in its urgent group."""
    config = values["config"]
    group = config.get("PUSH_KAFKA_GROUP_ID") or "push-worker"
    expected = {(config.get("PUSH_JOBS_TOPIC") or "push.jobs", group),
                (config.get("PUSH_URGENT_TOPIC") or "push.jobs.urgent", f"{group}.urgent")}
    triggers = {(t["metadata"]["topic"], t["metadata"]["consumerGroup"])
                for t in scaled_object.get("spec", {}).get("triggers", []) if t.get("type") == "kafka"}
    return [] if triggers == expected else [f"KEDA ScaledObject scales on {sorted(triggers)}, expected {sorted(expected)}"]


def monitoring_problems(rule, dashboard):
    """The PrometheusRule carries the rules file's groups, its runbook links pointed at runbookBaseURL; the
    dashboard's ConfigMap carries the sidecar label and the dashboard JSON as it is in files/."""
    problems = []
    files = chart / "files"
    import yaml
    expected = yaml.safe_load((files / "prometheus-rules.yaml").read_text())["groups"]
    if rule.get("spec", {}).get("groups") != expected:
        problems.append("the PrometheusRule's groups differ from files/prometheus-rules.yaml")
    if dashboard.get("metadata", {}).get("labels", {}).get("grafana_dashboard") != "1":
        problems.append("the dashboard ConfigMap lacks the grafana_dashboard: \"1\" sidecar label")
    shipped = json.loads((files / "grafana-dashboard.json").read_text())
    if json.loads(dashboard.get("data", {}).get("push-worker.json", "null") or "null") != shipped:
        problems.append("the dashboard ConfigMap's push-worker.json differs from files/grafana-dashboard.json")
    return problems


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
        keda = rendered(copy, ["hpa"])
        problems += keda_problems(keda["hpa"], keda["values"])
        monitoring_copy = pathlib.Path(directory) / "monitoring" / "push-worker"
        shutil.copytree(copy, monitoring_copy)
        monitoring = rendered(monitoring_copy, ["prometheusrule", "grafana-dashboard"])
        problems += monitoring_problems(monitoring["prometheusrule"], monitoring["grafana-dashboard"])

        defaults = pathlib.Path(directory) / "defaults" / "push-worker"
        shutil.copytree(chart, defaults)
        manifests = rendered(defaults, ["deployment", "networkpolicy"])
        problems += security_problems(manifests["deployment"], manifests["networkpolicy"], manifests["values"])

        disabled = pathlib.Path(directory) / "disabled" / "push-worker"
        shutil.copytree(chart, disabled)
        values_text = (disabled / "values.yaml").read_text()
        if "networkPolicy:\n  enabled: true" not in values_text:
            problems.append("values.yaml no longer contains 'networkPolicy:\\n  enabled: true'")
        (disabled / "values.yaml").write_text(values_text.replace("networkPolicy:\n  enabled: true", "networkPolicy:\n  enabled: false"))
        if rendered(disabled, ["networkpolicy"])["networkpolicy"]:
            problems.append("networkPolicy.enabled: false still renders a NetworkPolicy")
    for problem in problems:
        print(problem)
    print("chart: lint clean, security rules hold, KEDA scales on both lanes, rules and dashboard shipped as they are in files/"
          if not problems else "chart: FAILED")
    sys.exit(1 if problems else 0)


main()

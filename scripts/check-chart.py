#!/usr/bin/env python3
"""Lints charts/push-worker with Helm's own library (PyPI helm-sdkpy, Helm v4's Lint
action), once with its values and once with every optional part switched on, then checks
the rendered manifests against the chart's rules: the Deployment and NetworkPolicy's security
rules (egress one rule per port group, each to its own destinations), the PodDisruptionBudget's
eviction policy, KEDA's triggers (both lanes, with their authenticationRef), extra volumes, and
what the chart refuses to render (several replicas without PUSH_REDIS_URL, a SASL scaler without
authentication, the old networkPolicy.egressTo)."""
import asyncio
import ipaddress
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
    'authenticationRef:\n      name: ""': "authenticationRef:\n      name: push-worker-kafka",
    "extraVolumes: []": "extraVolumes:\n  - name: templates\n    configMap:\n      name: push-worker-templates",
    "extraVolumeMounts: []": "extraVolumeMounts:\n  - name: templates\n    mountPath: /etc/push-worker/templates\n    readOnly: true",
}
redis_in_config = ('  PUSH_KAFKA_BROKERS: "kafka:9092"      # required',
                   '  PUSH_KAFKA_BROKERS: "kafka:9092"      # required\n  PUSH_REDIS_URL: "redis://redis:6379/0"')
redis_in_secret = ("secretEnv: {}", "secretEnv:\n  PUSH_REDIS_URL:\n    secret: push-worker-redis\n    key: url")
two_replicas = ("replicaCount: 1", "replicaCount: 2")
autoscaling_on = ("autoscaling:\n  enabled: false", "autoscaling:\n  enabled: true")
keda_on = ("keda:\n    enabled: false", "keda:\n    enabled: true")
sasl = ('  PUSH_KAFKA_BROKERS: "kafka:9092"      # required',
        '  PUSH_KAFKA_BROKERS: "kafka:9092"      # required\n  PUSH_RDKAFKA_SECURITY_PROTOCOL: "SASL_SSL"')
# Addresses no egress rule may reach: link-local (cloud metadata at 169.254.169.254) and AWS's IPv6 metadata address.
unreachable = [ipaddress.ip_network(n) for n in ("169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128")]


def lint(path):
    result = asyncio.run(helm_sdkpy.Lint(helm_sdkpy.Configuration()).run(str(path)))
    # Helm's lint severities: 1 info, 2 warning, 3 error. The Go errors serialize without text,
    # so the path of each finding is what can be reported.
    findings = [m for m in result.get("Messages") or [] if m.get("Severity", 0) >= 2]
    failed = bool(result.get("Errors")) or bool(findings)
    return failed, [f"{m.get('Path')} (severity {m.get('Severity')})" for m in findings]


def lint_log(path):
    """What Helm logs while it lints the chart at `path` (in lint mode a `fail` is logged, not raised)."""
    script = "import asyncio, helm_sdkpy, sys; asyncio.run(helm_sdkpy.Lint(helm_sdkpy.Configuration()).run(sys.argv[1]))"
    return subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True).stderr


def fail_messages(log):
    return [json.loads(quoted) for quoted in re.findall(r'funcMap fail message=("(?:[^"\\]|\\.)*")', log)]


def refusals(path):
    """The messages of the chart's own `fail`s at `path`: what `helm template` and `helm install` would stop with."""
    return [message for message in fail_messages(lint_log(path)) if not message.startswith("rendered ")]


def variant(directory, name, *replacements):
    """A copy of the chart under `directory`/`name` with each (old, new) text of values.yaml replaced."""
    copy = pathlib.Path(directory) / name / "push-worker"
    shutil.copytree(chart, copy)
    values = (copy / "values.yaml").read_text()
    for old, new in replacements:
        if old not in values:
            raise SystemExit(f"chart: values.yaml no longer contains {old!r}")
        values = values.replace(old, new, 1)
    (copy / "values.yaml").write_text(values)
    return copy


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
    log = lint_log(path)
    found = {}
    for message in fail_messages(log):
        if not message.startswith("rendered "):
            continue
        name, manifest = message.split(" ", 2)[1:]
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
    problems += egress_problems(spec.get("egress", []), values["networkPolicy"])
    return problems


def egress_problems(egress, policy_values):
    """Egress is DNS (UDP and TCP 53) and then one rule per port group (HTTPS, Kafka, Redis), each with its own
    ports and exactly its own destinations from values; Kafka and Redis never reach the whole internet; no rule
    reaches a link-local or metadata address."""
    problems = []
    rules = [(sorted((p.get("port"), p.get("protocol")) for p in rule.get("ports") or [{}]), rule.get("to")) for rule in egress]
    dns_to = policy_values.get("dnsTo") or policy_values["httpsTo"]
    expected = [([(53, "TCP"), (53, "UDP")], dns_to)]
    for group in ("https", "kafka", "redis"):
        ports = policy_values[f"{group}Ports"]
        if ports:
            expected.append((sorted((port, "TCP") for port in set(ports)), policy_values[f"{group}To"]))
    if rules != expected:
        problems.append(f"NetworkPolicy egress is {rules}, expected DNS then one rule per port group: {expected}")
    for group in ("kafka", "redis"):
        for peer in policy_values[f"{group}To"]:
            cidr = (peer.get("ipBlock") or {}).get("cidr")
            if cidr and ipaddress.ip_network(cidr).prefixlen == 0:
                problems.append(f"networkPolicy.{group}To lets {group} ports reach every address ({cidr}) by default")
    for rule in egress:
        for peer in rule.get("to") or [{}]:
            block = peer.get("ipBlock")
            if block is None:
                problems.append(f"NetworkPolicy egress to {peer or 'every address'} is not an ipBlock that excludes link-local addresses")
                continue
            network = ipaddress.ip_network(block["cidr"])
            excepted = [ipaddress.ip_network(n) for n in block.get("except", [])]
            for forbidden in unreachable:
                if forbidden.version == network.version and network.overlaps(forbidden) and not any(
                        forbidden.subnet_of(e) for e in excepted if e.version == forbidden.version):
                    problems.append(f"NetworkPolicy egress to {block['cidr']} reaches {forbidden} (link-local, cloud metadata)")
    return problems


def pdb_problems(pdb):
    """A pod running but not ready may always be evicted: a drain never waits on a pod that serves nothing."""
    policy = pdb.get("spec", {}).get("unhealthyPodEvictionPolicy")
    return [] if policy == "AlwaysAllow" else [f"the PodDisruptionBudget's unhealthyPodEvictionPolicy is {policy!r}, not AlwaysAllow"]


def extra_volume_problems(deployment):
    """extraVolumes reach the pod and extraVolumeMounts the container, beside the chart's own."""
    pod = deployment["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["name"]: m for m in pod["containers"][0].get("volumeMounts", [])}
    problems = []
    if volumes.get("templates", {}).get("configMap", {}).get("name") != "push-worker-templates":
        problems.append("extraVolumes did not reach the pod's volumes")
    if mounts.get("templates", {}).get("mountPath") != "/etc/push-worker/templates":
        problems.append("extraVolumeMounts did not reach the container's volumeMounts")
    if "tmp" not in volumes or "apns" not in volumes:
        problems.append("extraVolumes replaced the chart's own volumes")
    return problems


def keda_problems(scaled_object, values):
    """KEDA scales on the lag of both lanes: the jobs topic in the worker's group, the urgent topic in its urgent group;
    every Kafka trigger logs in with the TriggerAuthentication values name (autoscaling.keda.authenticationRef)."""
    config = values["config"]
    group = config.get("PUSH_KAFKA_GROUP_ID") or "push-worker"
    expected = {(config.get("PUSH_JOBS_TOPIC") or "push.jobs", group),
                (config.get("PUSH_URGENT_TOPIC") or "push.jobs.urgent", f"{group}.urgent")}
    kafka = [t for t in scaled_object.get("spec", {}).get("triggers", []) if t.get("type") == "kafka"]
    triggers = {(t["metadata"]["topic"], t["metadata"]["consumerGroup"]) for t in kafka}
    problems = [] if triggers == expected else [f"KEDA ScaledObject scales on {sorted(triggers)}, expected {sorted(expected)}"]
    reference = values["autoscaling"]["keda"]["authenticationRef"]
    for trigger in kafka:
        if trigger.get("authenticationRef") != {"name": reference["name"], "kind": reference["kind"]}:
            problems.append(f"KEDA trigger for {trigger['metadata']['topic']} has authenticationRef {trigger.get('authenticationRef')}, "
                            f"expected {reference}")
    return problems


def refusal_problems(directory):
    """The chart renders with its own defaults and refuses several replicas without PUSH_REDIS_URL, a scaler that could
    not log in to SASL brokers, and the removed networkPolicy.egressTo, each with a message that says why."""
    problems = []
    cases = [
        ("defaults", [], None),
        ("two replicas without Redis", [two_replicas], "replicaCount: 2 without PUSH_REDIS_URL"),
        ("two replicas, Redis in config", [two_replicas, redis_in_config], None),
        ("two replicas, Redis in secretEnv", [two_replicas, redis_in_secret], None),
        ("autoscaling without Redis", [autoscaling_on], "autoscaling without PUSH_REDIS_URL"),
        ("KEDA without Redis", [keda_on], "autoscaling without PUSH_REDIS_URL"),
        ("KEDA on SASL brokers without authenticationRef", [autoscaling_on, keda_on, redis_in_secret, sasl],
         "autoscaling.keda.authenticationRef.name is empty"),
        ("the removed networkPolicy.egressTo", [("  dnsTo: []", "  dnsTo: []\n  egressTo: [{ipBlock: {cidr: 0.0.0.0/0}}]")],
         "networkPolicy.egressTo was split into httpsTo, kafkaTo and redisTo"),
        ("Kafka ports without destinations", [("  kafkaTo:\n", "  kafkaTo: []\n  unusedKafkaTo:\n")], "networkPolicy.kafkaTo is empty"),
    ]
    for index, (name, replacements, expected) in enumerate(cases):
        found = refusals(variant(directory, f"refusal-{index}", *replacements))
        if expected is None and found:
            problems.append(f"{name}: the chart refuses to render: {found}")
        elif expected is not None and not any(expected in message for message in found):
            problems.append(f"{name}: the chart renders, expected it to refuse with {expected!r} (refusals: {found})")
    return problems


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
        if refusals(copy):
            problems.append(f"all options on: the chart refuses to render: {refusals(copy)}")
        keda = rendered(copy, ["hpa", "deployment"])
        problems += keda_problems(keda["hpa"], keda["values"])
        problems += extra_volume_problems(keda["deployment"])
        problems += refusal_problems(directory)
        monitoring_copy = pathlib.Path(directory) / "monitoring" / "push-worker"
        shutil.copytree(copy, monitoring_copy)
        monitoring = rendered(monitoring_copy, ["prometheusrule", "grafana-dashboard"])
        problems += monitoring_problems(monitoring["prometheusrule"], monitoring["grafana-dashboard"])

        defaults = pathlib.Path(directory) / "defaults" / "push-worker"
        shutil.copytree(chart, defaults)
        manifests = rendered(defaults, ["deployment", "networkpolicy", "pdb"])
        problems += security_problems(manifests["deployment"], manifests["networkpolicy"], manifests["values"])
        problems += pdb_problems(manifests["pdb"])

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
    print("chart: lint clean, renders with its defaults, security rules and per-port-group egress hold, the PDB evicts unhealthy pods, "
          "KEDA scales on both lanes with its authenticationRef, extra volumes mount, several replicas without Redis are refused, "
          "rules and dashboard shipped as they are in files/"
          if not problems else "chart: FAILED")
    sys.exit(1 if problems else 0)


main()

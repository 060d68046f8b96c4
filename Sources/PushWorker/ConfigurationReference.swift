import PushPluginAPI
import PushPlugins

/// Every `PUSH_*` variable the worker reads: the single source for `--help`, the table in
/// docs/configuration.md and the unknown-variable check. Each plugin declares its own (`ProviderPlugin.settings`).
public struct EnvironmentVariable: Sendable {
    public let name: String
    public let defaultValue: String?
    public let meaning: String

    init(_ name: String, _ defaultValue: String?, _ meaning: String) {
        self.name = name
        self.defaultValue = defaultValue
        self.meaning = meaning
    }

    init(_ setting: Setting) {
        self.init(setting.name, setting.defaultValue, setting.help)
    }
}

public enum ConfigurationReference {
    public static let rdkafkaPrefix = "PUSH_RDKAFKA_"

    /// The `PUSH_RDKAFKA_*` variable that sets a librdkafka property.
    public static func rdkafkaVariable(for property: String) -> String {
        rdkafkaPrefix + property.uppercased().replacingOccurrences(of: ".", with: "_")
    }

    /// Every variable of a worker linking `plugins`: the core's, then each plugin's, in its declared order.
    public static func variables(plugins: [any ProviderPlugin] = LinkedPlugins.all) -> [EnvironmentVariable] {
        coreVariables + plugins.flatMap { $0.settings.map(EnvironmentVariable.init) } + closingVariables
    }

    static let coreVariables: [EnvironmentVariable] = [
        .init("PUSH_KAFKA_BROKERS", nil, "Kafka bootstrap servers, comma-separated (required by `run`)."),
        .init("PUSH_KAFKA_GROUP_ID", "push-worker", "Consumer group shared by all replicas."),
        .init("PUSH_JOBS_TOPIC", "push.jobs", "Topic the jobs are consumed from."),
        .init("PUSH_URGENT_TOPIC", "push.jobs.urgent", "Urgent lane: `call` and `cancel` jobs, consumed by a second consumer in the group `<PUSH_KAFKA_GROUP_ID>.urgent` with reserved in-flight capacity and HTTP/2 streams, so a chat backlog never delays a call (calls on `PUSH_JOBS_TOPIC` are accepted too). Set it to the `PUSH_JOBS_TOPIC` value to run one lane only."),
        .init("PUSH_OUTCOMES_TOPIC", "push.outcomes", "Topic every outcome is published to (key = bindingId)."),
        .init("PUSH_DLQ_TOPIC", "push.dlq", "Dead-letter topic for invalid jobs (reason in the `push-dlq-reason` header)."),
        .init("PUSH_RDKAFKA_<PROPERTY>", nil, "Any librdkafka property, `_` → `.` (e.g. `PUSH_RDKAFKA_SECURITY_PROTOCOL=ssl`); applied to consumer and producer."),
        .init("PUSH_RDKAFKA_ALLOW_UNSAFE", "false", "Lets through the librdkafka properties refused by default because they turn off the brokers' authentication or load or run code from outside the image: `enable.ssl.certificate.verification=false`, `ssl.endpoint.identification.algorithm=none`, `enable.sasl.oauthbearer.unsecure.jwt=true`, and any `plugin.library.paths`, `ssl.engine.location` or `sasl.kerberos.kinit.cmd` (logged as a warning when allowed). Not passed to librdkafka."),
        .init("PUSH_MAX_IN_FLIGHT", "1000", "Jobs being worked on in both lanes together (consumed, not finished, not waiting for an app slot); a lane at its share stops polling."),
        .init("PUSH_URGENT_RESERVED_IN_FLIGHT", "100", "Part of `PUSH_MAX_IN_FLIGHT` only the urgent lane may use; the urgent lane may also use what the normal lane leaves free, never the reverse. At most half of `PUSH_MAX_IN_FLIGHT` (a smaller `PUSH_MAX_IN_FLIGHT` lowers the default reserve to its half)."),
        .init("PUSH_MAX_READ_AHEAD", "2 × PUSH_MAX_IN_FLIGHT", "Jobs consumed but not finished per lane, including jobs waiting for an app slot: bounds memory and the uncommitted window when one app's endpoint stalls."),
        .init("PUSH_APP_MAX_IN_FLIGHT", "500", "Requests in flight per (provider, app); more wait for their app's slot without holding back other apps' jobs (`push_app_concurrency_limited_total`)."),
        .init("PUSH_SHED_LAG_MS", "0", "Overload policy: when the normal lane lags more than this (now − Kafka timestamp of the jobs it consumes), `message` jobs whose remaining TTL is shorter than the lag are `expired` with reason `shed` instead of sent late (`push_jobs_shed_total`). Calls and cancels are never shed. 0: off."),
        .init("PUSH_MAX_JOB_BYTES", "131072", "Largest accepted job message; larger ones go to the dead-letter topic."),
        .init("PUSH_RETRY_BASE_MS", "1000", "Backoff base: retry n waits a random time in [0, base·2^(n-1)] (full jitter)."),
        .init("PUSH_RETRY_MAX_MS", "60000", "Backoff cap."),
        .init("PUSH_MAX_ATTEMPTS", "5", "Attempts per target, the first included; then the outcome is `failed`."),
        .init("PUSH_REDIS_URL", nil, "`redis://[[user]:password@]host:port/db` for dedupe windows, idempotency records and the retry queue, shared by all replicas. Unset: in-memory stores and in-task retries (single replica only; logged as a warning)."),
        .init("PUSH_REDIS_CONNECTIONS", "4", "Connections in the Redis pool."),
        .init("PUSH_DEDUPE_WINDOW_CALL_MS", "5000", "Dedupe window for `call` jobs: a second push with the same identity (dedupeKey, else collapseKey, else kind) to the same binding inside it is `deduplicated`; 0 disables."),
        .init("PUSH_DEDUPE_WINDOW_MESSAGE_MS", "10000", "Dedupe window for `message` jobs."),
        .init("PUSH_DEDUPE_WINDOW_CANCEL_MS", "0", "Dedupe window for `cancel` jobs (off: two cancels of different calls must both go out)."),
        .init("PUSH_DEDUPE_WINDOW_CUSTOM_MS", "0", "Dedupe window for `custom` jobs."),
        .init("PUSH_DEDUPE_WINDOW_WAKE_MS", "0", "Dedupe window for `wake` jobs."),
        .init("PUSH_IDEMPOTENCY_TTL_S", "86400", "How long a (job, binding) final outcome is remembered, so a redelivered job is not sent again."),
        .init("PUSH_RETRY_LEASE_MS", "30000", "How long a claimed retry belongs to one worker; a crashed worker's retries are taken over after it."),
        .init("PUSH_PUBLISH_RETRYING", "false", "Also publish a `retrying` outcome each time a target goes to the retry queue."),
        .init("PUSH_CIRCUIT_FAILURES", "50", "Consecutive transient failures of one (provider, app) that open its circuit."),
        .init("PUSH_CIRCUIT_COOLDOWN_MS", "30000", "How long an open circuit (credential rejection or failure storm) stops sending for that app."),
        .init("PUSH_SHUTDOWN_GRACE_S", "20", "On SIGTERM/SIGINT, how long in-flight jobs may finish before they are left for redelivery."),
        .init("PUSH_PROVIDERS", nil, "Comma-separated list restricting the enabled plugins (e.g. `apns,fcm`); default: every provider whose configuration is present."),
        .init("PUSH_HTTP_MAX_CONNECTIONS", "2", "HTTP/2 connections per provider host (each multiplexes up to 100 streams)."),
        .init("PUSH_TEMPLATES_DIR", nil, "Payload templates per provider, app and kind: `<dir>/<provider>/<app>/<kind>.mustache` (Mustache, keywords as Mizu's message files, values JSON-escaped); checked at start-up. Unset: built-in payloads."),
        .init("PUSH_TEMPLATES_RELOAD_S", "5", "How often `PUSH_TEMPLATES_DIR` is re-read (ConfigMap updates); a broken new version keeps the last good one and logs one error; 0 disables."),
        .init("PUSH_APPS_FILE", nil, "JSON file naming several apps and their credential files; see \"Several apps\" in docs/configuration.md."),
    ]

    /// The worker's own variables after the plugins' (the operations endpoint, logging).
    static let closingVariables: [EnvironmentVariable] = [
        .init("PUSH_HTTP_PORT", "9090", "Port of `/metrics` (Prometheus), `/healthz` and `/readyz`; 0 picks a free port."),
        .init("PUSH_HTTP_BIND", "0.0.0.0", "Address that endpoint listens on: an IPv4 or IPv6 literal (`::` for every interface, `127.0.0.1` for the pod alone)."),
        .init("PUSH_HTTP_IDLE_TIMEOUT_S", "60", "A connection to that endpoint whose client sends nothing for this long is closed."),
        .init("PUSH_HTTP_MAX_INBOUND_CONNECTIONS", "32", "Connections that endpoint keeps open at once (probes, Prometheus); further ones are closed as soon as they are accepted."),
        .init("PUSH_LOG_LEVEL", "info", "trace, debug, info, notice, warning, error or critical."),
        .init("PUSH_LOG_FORMAT", "json", "`json` (one object per line) or `text`."),
    ]

    /// The reference as a Markdown table (docs/configuration.md) or aligned text (`--help`).
    public static func render(markdown: Bool, plugins: [any ProviderPlugin] = LinkedPlugins.all) -> String {
        let variables = variables(plugins: plugins)
        if markdown {
            var lines = ["| variable | default | meaning |", "| --- | --- | --- |"]
            for variable in variables {
                lines.append("| `\(variable.name)` | \(variable.defaultValue.map { "`\($0)`" } ?? "—") | \(variable.meaning) |")
            }
            return lines.joined(separator: "\n")
        }
        return variables.map { variable in
            let defaultText = variable.defaultValue.map { " (default: \($0))" } ?? ""
            return "  \(variable.name)\(defaultText)\n      \(variable.meaning.replacingOccurrences(of: "`", with: ""))"
        }.joined(separator: "\n")
    }
}

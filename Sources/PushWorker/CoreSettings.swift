import PushCore
import PushPipeline
import PushPluginAPI
import PushHTTP

/// The worker's own `PUSH_*` variables, each declared once (name, type, default, range, help); the plugins
/// declare theirs. `ConfigurationReference` renders them all, `WorkerConfiguration` reads them.
enum CoreSettings {
    static let kafkaBrokers = Setting(
        "PUSH_KAFKA_BROKERS",
        "Kafka bootstrap servers, comma-separated (required by `run`).")
    static let kafkaGroupId = Setting(
        "PUSH_KAFKA_GROUP_ID", default: "push-worker",
        "Consumer group shared by all replicas.")
    static let jobsTopic = Setting(
        "PUSH_JOBS_TOPIC", default: "push.jobs",
        "Topic the jobs are consumed from.")
    static let urgentTopic = Setting(
        "PUSH_URGENT_TOPIC", default: "push.jobs.urgent",
        "Urgent lane: `call` and `cancel` jobs, consumed by a second consumer in the group `<PUSH_KAFKA_GROUP_ID>.urgent` with reserved in-flight capacity and HTTP/2 streams, so a chat backlog never delays a call (calls on `PUSH_JOBS_TOPIC` are accepted too). Set it to the `PUSH_JOBS_TOPIC` value to run one lane only."
    )
    static let outcomesTopic = Setting(
        "PUSH_OUTCOMES_TOPIC", default: "push.outcomes",
        "Topic every outcome is published to (key = bindingId).")
    static let dlqTopic = Setting(
        "PUSH_DLQ_TOPIC", default: "push.dlq",
        "Dead-letter topic for invalid jobs (reason in the `push-dlq-reason` header).")
    static let rdkafkaProperty = Setting(
        "PUSH_RDKAFKA_<PROPERTY>",
        "Any librdkafka property, `_` → `.` (e.g. `PUSH_RDKAFKA_SECURITY_PROTOCOL=ssl`); applied to consumer and producer. The worker's own (`bootstrap.servers` and its alias `metadata.broker.list`, `group.id`, `enable.auto.offset.store`) are refused."
    )
    static let rdkafkaAllowUnsafe = Setting(
        "PUSH_RDKAFKA_ALLOW_UNSAFE", .boolean, default: "false",
        "Lets through the librdkafka properties refused by default because they turn off the brokers' authentication, load or run code from outside the image, or break the delivery contract (offsets committed after the outcomes are acknowledged by every in-sync replica, none skipped): `enable.ssl.certificate.verification=false`, `ssl.endpoint.identification.algorithm=none`, `enable.sasl.oauthbearer.unsecure.jwt=true`, any `plugin.library.paths`, `ssl.engine.location` or `sasl.kerberos.kinit.cmd`, `acks`/`request.required.acks` other than `all`/`-1`, `enable.idempotence=false`, `enable.auto.commit=false`, `auto.commit.interval.ms` of 0 or above 10000, `message.timeout.ms`/`delivery.timeout.ms` of 0, `auto.offset.reset=latest` (`largest`, `end`) and `isolation.level=read_uncommitted` (logged as a warning when allowed). Not passed to librdkafka."
    )
    static let maxInFlight = Setting(
        "PUSH_MAX_IN_FLIGHT", .integer(1...1_000_000), default: "1000",
        "Jobs being worked on in both lanes together (consumed, not finished, not waiting for an app slot); a lane at its share polls only to find other apps' jobs, within `PUSH_MAX_READ_AHEAD` ([fair sharing](delivery.md#semantics))."
    )
    static let urgentReservedInFlight = Setting(
        "PUSH_URGENT_RESERVED_IN_FLIGHT", .integer(0...1_000_000), default: "100",
        "Part of `PUSH_MAX_IN_FLIGHT` only the urgent lane may use; the urgent lane may also use what the normal lane leaves free, never the reverse. At most half of `PUSH_MAX_IN_FLIGHT` (a smaller `PUSH_MAX_IN_FLIGHT` lowers the default reserve to its half)."
    )
    static let maxReadAhead = Setting(
        "PUSH_MAX_READ_AHEAD", default: "10 × PUSH_MAX_IN_FLIGHT",
        "Jobs consumed but not finished per lane, including jobs waiting for an app slot, not those waiting behind an earlier job of their user: how far a lane at capacity reads ahead to find other apps' and users' jobs behind one app's burst, and the uncommitted window."
    )
    static let maxReadAheadBytes = Setting(
        "PUSH_MAX_READ_AHEAD_BYTES", .integer(1_048_576...68_719_476_736), default: "33554432",
        "Memory a lane may hold in consumed, unfinished jobs (each counted as its Kafka key and value plus 2 KiB), those waiting behind an earlier job of their user included; at it the lane reads nothing more. From half of it the partitions whose users hold the most jobs behind them are paused, heaviest first, so slow users' jobs never stop other users' from being read ([delivery](delivery.md#semantics))."
    )
    static let appMaxInFlight = Setting(
        "PUSH_APP_MAX_IN_FLIGHT", .integer(1...1_000_000), default: "500",
        "Requests in flight per (provider, app); more wait for their app's slot without holding back other apps' jobs (`push_app_concurrency_limited_total`). The apps of one provider endpoint also share its bound (see `PUSH_HTTP_MAX_CONNECTIONS`)."
    )
    static let shedLagMs = Setting(
        "PUSH_SHED_LAG_MS", .integer(0...86_400_000), default: "0",
        "Overload policy: when the normal lane lags more than this (now − Kafka timestamp of the jobs it consumes), `message` jobs whose remaining TTL is shorter than the lag are `expired` with reason `shed` instead of sent late (`push_jobs_shed_total`). Calls and cancels are never shed. 0: off."
    )
    static let maxJobBytes = Setting(
        "PUSH_MAX_JOB_BYTES", .integer(1024...10_485_760), default: "131072",
        "Largest accepted job message; larger ones go to the dead-letter topic.")
    static let retryBaseMs = Setting(
        "PUSH_RETRY_BASE_MS", .integer(1...3_600_000), default: "1000",
        "Backoff base: retry n waits a random time in [0, base·2^(n-1)] (full jitter).")
    static let retryMaxMs = Setting(
        "PUSH_RETRY_MAX_MS", .integer(1...86_400_000), default: "60000",
        "Backoff cap.")
    static let maxAttempts = Setting(
        "PUSH_MAX_ATTEMPTS", .integer(1...100), default: "5",
        "Attempts per target, the first included; then the outcome is `failed`.")
    static let redisUrl = Setting(
        "PUSH_REDIS_URL",
        "`redis://[[user]:password@]host:port/db` for dedupe windows, idempotency records and the retry queue, shared by all replicas; `rediss://` for TLS (managed Redis), the server's certificate and host name always verified. A Redis Cluster is found out by itself: name one or more of its nodes, comma-separated (`redis://:pw@10.0.0.1:7000,10.0.0.2:7000/0`; database 0). The user needs `+@all ~*` or the commands in docs/operations.md. Unset: in-memory stores and in-task retries (single replica only; logged as a warning)."
    )
    static let redisCaFile = Setting(
        "PUSH_REDIS_CA_FILE", .file,
        "PEM CA bundle trusted for `rediss://` instead of the system store (a private CA, Memorystore's server CA). Read again for each new connection, so a rotated bundle is used without a restart."
    )
    static let redisCertFile = Setting(
        "PUSH_REDIS_CERT_FILE", .file,
        "PEM client certificate presented to Redis servers that require mutual TLS (`tls-auth-clients yes`), with `PUSH_REDIS_KEY_FILE` unless it holds its key. Read again for each new connection."
    )
    static let redisKeyFile = Setting(
        "PUSH_REDIS_KEY_FILE", .file, "PEM private key of `PUSH_REDIS_CERT_FILE`.")
    static let redisTlsServerName = Setting(
        "PUSH_REDIS_TLS_SERVER_NAME",
        "The name every Redis node's certificate must carry, sent as SNI: for a Redis Cluster over TLS whose nodes announce IP addresses. Unset: the host named in `PUSH_REDIS_URL` is verified, and a node reached by IP address must have that address in its certificate."
    )
    static let redisConnections = Setting(
        "PUSH_REDIS_CONNECTIONS", .integer(1...64), default: "1",
        "Connections to each Redis node (each master on a Redis Cluster). The commands of all jobs waiting for a connection share its next round trip, so one connection costs the least CPU per job; more lower the wait behind a slow command."
    )
    static let dedupeWindowCallMs = Setting(
        "PUSH_DEDUPE_WINDOW_CALL_MS", .integer(0...86_400_000),
        default: String(DedupeWindows.default.window(for: .call)),
        "Dedupe window for `call` jobs: a second push with the same identity (dedupeKey, else collapseKey, else kind) to the same binding inside it is `deduplicated`; 0 disables."
    )
    static let dedupeWindowMessageMs = Setting(
        "PUSH_DEDUPE_WINDOW_MESSAGE_MS", .integer(0...86_400_000),
        default: String(DedupeWindows.default.window(for: .message)),
        "Dedupe window for `message` jobs.")
    static let dedupeWindowCancelMs = Setting(
        "PUSH_DEDUPE_WINDOW_CANCEL_MS", .integer(0...86_400_000),
        default: String(DedupeWindows.default.window(for: .cancel)),
        "Dedupe window for `cancel` jobs (off: two cancels of different calls must both go out).")
    static let dedupeWindowCustomMs = Setting(
        "PUSH_DEDUPE_WINDOW_CUSTOM_MS", .integer(0...86_400_000),
        default: String(DedupeWindows.default.window(for: .custom)),
        "Dedupe window for `custom` jobs.")
    static let dedupeWindowWakeMs = Setting(
        "PUSH_DEDUPE_WINDOW_WAKE_MS", .integer(0...86_400_000),
        default: String(DedupeWindows.default.window(for: .wake)),
        "Dedupe window for `wake` jobs.")
    static let idempotencyTtlS = Setting(
        "PUSH_IDEMPOTENCY_TTL_S", .integer(60...2_592_000), default: "3600",
        "How long a (job, binding) final outcome is remembered, so a job Kafka delivers again is not sent again. It must outlast the longest an offset stays uncommitted (`push_oldest_uncommitted_seconds`: seconds normally; an outage of Kafka or Redis holds it) plus the time until another replica takes the partition over; see docs/delivery.md. Records are kept up to an eighth longer (they expire with the slice of time they were written in) and are filed by it: after a change, records written under the old value are no longer found, so jobs Kafka redelivers from before the change may be sent again."
    )
    static let retryLeaseMs = Setting(
        "PUSH_RETRY_LEASE_MS", .integer(1000...3_600_000), default: "30000",
        "How long a claimed retry belongs to one worker without renewal (renewed every third of it while the retry runs); a crashed worker's retries are taken over after it. At least the longest provider request timeout plus 5 s."
    )
    /// What a retry lease must leave beyond the longest request timeout: the renewal's round trip and a late renewal
    /// under load (leases are renewed every third of their length, so this is the slack of the last third).
    static let retryLeaseMargin = Duration.seconds(5)
    static let publishRetrying = Setting(
        "PUSH_PUBLISH_RETRYING", .boolean, default: "false",
        "Also publish a `retrying` outcome each time a target goes to the retry queue.")
    static let circuitFailures = Setting(
        "PUSH_CIRCUIT_FAILURES", .integer(1...100_000), default: "50",
        "Consecutive transient failures of one (provider, app) that open its circuit.")
    static let circuitCooldownMs = Setting(
        "PUSH_CIRCUIT_COOLDOWN_MS", .integer(100...3_600_000), default: "30000",
        "How long an open circuit (credential rejection or failure storm) stops sending for that app.")
    static let shutdownGraceS = Setting(
        "PUSH_SHUTDOWN_GRACE_S", .integer(0...3600), default: "20",
        "On SIGTERM/SIGINT, how long in-flight jobs may finish before they are left for redelivery.")
    static let providers = Setting(
        "PUSH_PROVIDERS",
        "Comma-separated list restricting the enabled plugins (e.g. `apns,fcm`); default: every provider whose configuration is present.")
    static let httpMaxConnections = Setting(
        "PUSH_HTTP_MAX_CONNECTIONS", .integer(1...64), default: "2",
        "HTTP/2 connections per provider host (each multiplexes up to 100 streams). Requests in flight per provider endpoint, all its apps together, are bounded at twice what its connections carry (2 × connections × 100); more wait, as jobs in flight, before they start."
    )
    static let templatesDir = Setting(
        "PUSH_TEMPLATES_DIR",
        "Payload templates per provider, app and kind: `<dir>/<provider>/<app>/<kind>.mustache` (Mustache, keywords as Mizu's message files, values JSON-escaped); checked at start-up. Unset: built-in payloads."
    )
    static let templatesReloadS = Setting(
        "PUSH_TEMPLATES_RELOAD_S", .integer(0...3600), default: "5",
        "How often `PUSH_TEMPLATES_DIR` is re-read (ConfigMap updates); a broken new version keeps the last good one and logs one error; 0 disables."
    )
    static let soundCall = Setting(
        "PUSH_TEMPLATES_SOUND_CALL",
        "`SOUND` in templates for calls whose job names no sound (Mizu's `pushnotification_sound_call`).")
    static let soundMessage = Setting(
        "PUSH_TEMPLATES_SOUND_MESSAGE",
        "`SOUND` in templates for messages whose job names no sound (`pushnotification_sound_chat`).")
    static let soundOther = Setting(
        "PUSH_TEMPLATES_SOUND_OTHER",
        "`SOUND` in templates for other kinds whose job names no sound (`pushnotification_sound_other`).")
    static let appsFile = Setting(
        "PUSH_APPS_FILE",
        "JSON file naming several apps and their credential files; see \"Several apps\" in docs/configuration.md.")
    static let appsReloadS = Setting(
        "PUSH_APPS_RELOAD_S", .integer(0...3600), default: "5",
        "How often `PUSH_APPS_FILE`, the credential files it names and the single-app credential files are checked for changes (by content, so a Kubernetes secret's `..data` swap counts); a change is applied without a restart, a broken version keeps the last good one. SIGHUP checks at once; 0: only on SIGHUP."
    )
    static let httpPort = Setting(
        "PUSH_HTTP_PORT", .integer(0...65535), default: "9090",
        "Port of `/metrics` (Prometheus), `/healthz` and `/readyz`; 0 picks a free port.")
    static let httpBind = Setting(
        "PUSH_HTTP_BIND", default: "0.0.0.0",
        "Address that endpoint listens on: an IPv4 or IPv6 literal (`::` for every interface, `127.0.0.1` for the pod alone).")
    static let httpIdleTimeoutS = Setting(
        "PUSH_HTTP_IDLE_TIMEOUT_S", .integer(1...3600), default: "60",
        "A connection to that endpoint whose client sends nothing for this long is closed.")
    static let httpMaxInboundConnections = Setting(
        "PUSH_HTTP_MAX_INBOUND_CONNECTIONS", .integer(1...10_000), default: "32",
        "Connections that endpoint keeps open at once (probes, Prometheus); a further one is always let in and takes the place of the oldest one between requests, or else of the oldest one (reset), so clients holding connections cannot keep a probe out."
    )
    static let logLevel = Setting(
        "PUSH_LOG_LEVEL", default: "info",
        "trace, debug, info, notice, warning, error or critical.")
    static let logFormat = Setting(
        "PUSH_LOG_FORMAT", default: "json",
        "`json` (one object per line) or `text`.")

    static let dedupeWindows: [JobKind: Setting] = [
        .call: dedupeWindowCallMs, .message: dedupeWindowMessageMs, .cancel: dedupeWindowCancelMs,
        .custom: dedupeWindowCustomMs, .wake: dedupeWindowWakeMs,
    ]

    /// In the reference, before the plugins' settings.
    static let opening: [Setting] = [
        kafkaBrokers, kafkaGroupId, jobsTopic, urgentTopic, outcomesTopic, dlqTopic, rdkafkaProperty,
        rdkafkaAllowUnsafe, maxInFlight, urgentReservedInFlight, maxReadAhead, maxReadAheadBytes, appMaxInFlight, shedLagMs,
        maxJobBytes, retryBaseMs, retryMaxMs, maxAttempts, redisUrl, redisCaFile, redisCertFile, redisKeyFile,
        redisTlsServerName, redisConnections, dedupeWindowCallMs,
        dedupeWindowMessageMs, dedupeWindowCancelMs, dedupeWindowCustomMs, dedupeWindowWakeMs, idempotencyTtlS,
        retryLeaseMs, publishRetrying, circuitFailures, circuitCooldownMs, shutdownGraceS, providers,
        httpMaxConnections, templatesDir, templatesReloadS, soundCall, soundMessage, soundOther, appsFile, appsReloadS,
    ]
    /// Variables earlier builds read and this one does not, with what took their place. One that is set is ignored with
    /// a warning that says so (`WorkerConfiguration.removedVariables`), not reported as a typo: a deployment that still
    /// sets it starts as before.
    static let removed: [String: String] = [
        "PUSH_HTTP_CLIENT":
            "every provider request goes over the one HTTP/2 client (nghttp2's framing on swift-nio), libcurl only to HTTP/1.1-only hosts; unset it"
    ]

    /// In the reference, after the plugins' settings.
    static let closing: [Setting] = [
        httpPort, httpBind, httpIdleTimeoutS, httpMaxInboundConnections, logLevel, logFormat,
    ]
}

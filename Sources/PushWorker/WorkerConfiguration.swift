import Foundation
import Logging
import PushCore
import PushHTTP
import PushPipeline
import PushPluginAPI
import PushPlugins
import PushRedis
import PushTemplates

/// Start-up configuration problems, one line each.
public struct ConfigurationErrors: Error, CustomStringConvertible {
    public let problems: [String]
    public var description: String { problems.joined(separator: "\n") }
}

/// The typed configuration of `push-worker run`, read from `PUSH_*` variables.
public struct WorkerConfiguration: Sendable {
    public var brokers: String
    public var groupId: String
    public var pipeline: PipelineConfiguration
    /// librdkafka properties from `PUSH_RDKAFKA_*`, applied to consumer and producer.
    public var rdkafkaProperties: [String: String]
    /// Unsafe librdkafka settings among them that `PUSH_RDKAFKA_ALLOW_UNSAFE` let through.
    public var allowedUnsafeKafkaSettings: [String]
    public var maximumConnectionsPerHost: Int
    /// The `/metrics`, `/healthz`, `/readyz` endpoint.
    public var operations: OperationsEndpoint
    public var redisURL: RedisURL?
    public var redisConnections: Int
    /// TLS for `rediss://` (`PUSH_REDIS_CA_FILE`, `…_CERT_FILE`, `…_KEY_FILE`, `…_TLS_SERVER_NAME`).
    public var redisTLS = RedisTLSSettings()
    /// How long a final outcome is remembered so a redelivered job is not sent again (`PUSH_IDEMPOTENCY_TTL_S`).
    public var idempotencyRetention: Duration = .seconds(3_600)
    /// The enabled providers' plugins, configured.
    public var plugins: [ConfiguredPlugin]
    /// The target formats of every linked plugin: jobs may name a provider that is linked but not enabled.
    public var targetFormats: [any TargetFormat]
    public var enabledProviders: Set<ProviderID> { Set(plugins.map(\.id)) }
    /// Payload templates from `PUSH_TEMPLATES_DIR`; nil = built-in payloads only.
    public var templates: TemplateDirectory?
    /// How often the templates are re-read (`PUSH_TEMPLATES_RELOAD_S`); nil = never.
    public var templatesReloadInterval: Duration?
    public var logLevel: Logger.Level
    public var logFormat: LogFormat
    /// Variables that look like ours but are not (typos).
    public var unknownVariables: [String]
    /// One line for each variable that is set though this build no longer reads it (`CoreSettings.removed`): what took its place.
    public var removedVariables: [String]
    /// What the plugins were configured from, read again by live configuration.
    public var providerSource: ProviderSource
    /// How often `PUSH_APPS_FILE` and the credential files are checked for changes (`PUSH_APPS_RELOAD_S`); nil = only on SIGHUP.
    public var appsReloadInterval: Duration?
    /// Whether the `OTEL_*` variables turn trace export on (`TraceExport`).
    public var exportsTraces = false
    /// The HTTP proxy provider traffic leaves through: `HTTPS_PROXY`/`https_proxy` and `NO_PROXY`/`no_proxy` (curl's rules).
    public var egressProxy: EgressProxy?
    /// The content of those files as they were before the plugins read them.
    var providerVersion: ConfigurationVersion

    /// The configured plugin of `provider`, if it is enabled.
    public func plugin(_ provider: ProviderID) -> ConfiguredPlugin? { plugins.first { $0.id == provider } }

    public static func load(
        from environment: [String: String], requireBrokers: Bool = true,
        plugins linked: [any ProviderPlugin] = LinkedPlugins.all
    ) -> Result<WorkerConfiguration, ConfigurationErrors> {
        var reader = SettingsReader(environment)
        let brokers = reader.string(CoreSettings.kafkaBrokers) ?? ""
        if requireBrokers, brokers.isEmpty {
            reader.problem("PUSH_KAFKA_BROKERS is required: the Kafka bootstrap servers, e.g. kafka-0:9092,kafka-1:9092")
        }
        let groupId = reader.string(CoreSettings.kafkaGroupId) ?? ""
        var pipeline = PipelineConfiguration(
            jobsTopic: reader.string(CoreSettings.jobsTopic) ?? "",
            urgentTopic: reader.string(CoreSettings.urgentTopic) ?? "",
            outcomesTopic: reader.string(CoreSettings.outcomesTopic) ?? "",
            deadLetterTopic: reader.string(CoreSettings.dlqTopic) ?? "")
        pipeline.maximumInFlightJobs = reader.integer(CoreSettings.maxInFlight)
        pipeline.urgentReservedInFlightJobs = reader.integer(CoreSettings.urgentReservedInFlight)
        if reader.isSet(CoreSettings.urgentReservedInFlight), pipeline.urgentReservedInFlightJobs > pipeline.maximumInFlightJobs / 2 {
            reader.problem(
                "PUSH_URGENT_RESERVED_IN_FLIGHT (\(pipeline.urgentReservedInFlightJobs)) must be at most half of PUSH_MAX_IN_FLIGHT (\(pipeline.maximumInFlightJobs))"
            )
        }
        if reader.isSet(CoreSettings.maxReadAhead) {
            let readAhead = reader.integer(CoreSettings.maxReadAhead.name, default: 10 * pipeline.maximumInFlightJobs, in: 1...10_000_000)
            if readAhead < pipeline.maximumInFlightJobs {
                reader.problem("PUSH_MAX_READ_AHEAD (\(readAhead)) must not be below PUSH_MAX_IN_FLIGHT (\(pipeline.maximumInFlightJobs))")
            }
            pipeline.maximumReadAheadJobs = readAhead
        }
        pipeline.maximumReadAheadBytes = reader.integer(CoreSettings.maxReadAheadBytes)
        pipeline.maximumInFlightPerApp = reader.integer(CoreSettings.appMaxInFlight)
        let shedLag = reader.integer(CoreSettings.shedLagMs)
        pipeline.shedPolicy = ShedPolicy(lagThresholdMilliseconds: shedLag > 0 ? Int64(shedLag) : nil)
        pipeline.jobLimits.maximumBytes = reader.integer(CoreSettings.maxJobBytes)
        let retryBase = reader.integer(CoreSettings.retryBaseMs)
        let retryMaximum = reader.integer(CoreSettings.retryMaxMs)
        if retryMaximum < retryBase {
            reader.problem("PUSH_RETRY_MAX_MS (\(retryMaximum)) must not be below PUSH_RETRY_BASE_MS (\(retryBase))")
        }
        pipeline.retryPolicy = RetryPolicy(
            baseMilliseconds: Int64(retryBase), maximumMilliseconds: Int64(retryMaximum),
            maximumAttempts: reader.integer(CoreSettings.maxAttempts))
        pipeline.shutdownGrace = .seconds(reader.integer(CoreSettings.shutdownGraceS))
        for kind in JobKind.allCases {
            guard let setting = CoreSettings.dedupeWindows[kind] else { continue }
            pipeline.dedupeWindows.milliseconds[kind] = Int64(reader.integer(setting))
        }
        let idempotencyRetention = Duration.seconds(reader.integer(CoreSettings.idempotencyTtlS))
        pipeline.consumerGroup = groupId
        pipeline.retryLease = .milliseconds(reader.integer(CoreSettings.retryLeaseMs))
        pipeline.publishRetryingOutcomes = reader.boolean(CoreSettings.publishRetrying)
        pipeline.circuitBreaker = CircuitBreaker.Settings(
            failureThreshold: reader.integer(CoreSettings.circuitFailures),
            coolDownMilliseconds: Int64(reader.integer(CoreSettings.circuitCooldownMs)))
        var redisURL: RedisURL?
        if let text = reader.string(CoreSettings.redisUrl) {
            redisURL = RedisURL(text)
            if redisURL == nil {
                reader.problem(
                    "PUSH_REDIS_URL must look like redis[s]://[[user]:password@]host:port/db or, for a Redis Cluster, redis[s]://[[user]:password@]host:port,host:port/0, got \"\(RedisURL.masked(text))\""
                )
            }
        }
        let redisTLS = Self.redisTLS(url: redisURL, reader: &reader)
        let redisConnections = reader.integer(CoreSettings.redisConnections)
        let connections = reader.integer(CoreSettings.httpMaxConnections)
        // Twice the streams an endpoint's connections carry: requests being prepared or read need slots too.
        pipeline.maximumInFlightPerEndpoint =
            2 * connections * HTTPTransportConfiguration(maximumConnectionsPerHost: connections).maximumStreamsPerConnection
        let bindAddress = reader.string(CoreSettings.httpBind) ?? ""
        if !OperationsEndpoint.isBindableAddress(bindAddress) {
            reader.problem(
                "PUSH_HTTP_BIND must be an IPv4 or IPv6 address to listen on, e.g. 0.0.0.0, 127.0.0.1 or ::, got \"\(bindAddress)\"")
        }
        let operations = OperationsEndpoint(
            bindAddress: bindAddress,
            port: reader.integer(CoreSettings.httpPort),
            idleTimeout: .seconds(reader.integer(CoreSettings.httpIdleTimeoutS)),
            maximumConnections: reader.integer(CoreSettings.httpMaxInboundConnections))

        let providers = ProviderSource(environment: environment, linked: linked)
        // Read before the plugins read the files: a change while they do is seen by the first check.
        let providerVersion = ConfigurationVersion.read(providers)
        let (enabled, aProviderWasRefused) = providers.configure(&reader)

        var templates: TemplateDirectory?
        if let path = reader.string(CoreSettings.templatesDir) {
            var sounds: [JobKind: String] = [:]
            for kind in JobKind.allCases {
                let setting =
                    switch kind {
                    case .call: CoreSettings.soundCall
                    case .message: CoreSettings.soundMessage
                    case .cancel, .custom, .wake: CoreSettings.soundOther
                    }
                sounds[kind] = reader.string(setting)
            }
            switch TemplateDirectory.load(path: path, shapes: linked.compactMap(\.templateShape), defaultSounds: sounds) {
            case .success(let loaded): templates = loaded
            case .failure(let problems): for line in problems.lines { reader.problem("PUSH_TEMPLATES_DIR: \(line)") }
            }
        }
        let reloadSeconds = reader.integer(CoreSettings.templatesReloadS)
        let appsReloadSeconds = reader.integer(CoreSettings.appsReloadS)

        if let longest = enabled.map(\.requestTimeout).max() { pipeline.attemptTimeout = longest }
        let leaseFloor = pipeline.attemptTimeout + CoreSettings.retryLeaseMargin
        if pipeline.retryLease < leaseFloor {
            reader.problem(
                "PUSH_RETRY_LEASE_MS (\(pipeline.retryLease.milliseconds)) must be at least the longest request timeout of the enabled providers plus \(CoreSettings.retryLeaseMargin.milliseconds / 1000) s (\(leaseFloor.milliseconds)): a lease that lapses during a send lets another replica send the same retry"
            )
        }
        // A provider whose configuration was refused has said why already.
        if enabled.isEmpty, requireBrokers, !aProviderWasRefused {
            reader.problem(
                "no provider is configured; set one of: " + linked.map(\.configuredBy).joined(separator: "; ")
                    + " (see push-worker run --help)")
        }

        let levelName = reader.string(CoreSettings.logLevel) ?? ""
        let level = Logger.Level(rawValue: levelName)
        if level == nil {
            reader.problem(
                "PUSH_LOG_LEVEL must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(levelName)\"")
        }
        let formatName = reader.string(CoreSettings.logFormat) ?? ""
        let format = LogFormat(rawValue: formatName)
        if format == nil { reader.problem("PUSH_LOG_FORMAT must be json or text, got \"\(formatName)\"") }

        var rdkafka: [String: String] = [:]
        for (name, value) in environment where name.hasPrefix(ConfigurationReference.rdkafkaPrefix) && name != "PUSH_RDKAFKA_ALLOW_UNSAFE" {
            let property = name.dropFirst(ConfigurationReference.rdkafkaPrefix.count).lowercased().replacingOccurrences(of: "_", with: ".")
            guard !property.isEmpty else { continue }
            rdkafka[property] = value
        }
        for problem in ManagedKafkaProperty.problems(in: rdkafka) { reader.problem(problem) }
        let unsafeKafkaSettings = UnsafeKafkaProperty.settings(in: rdkafka)
        if !reader.boolean(CoreSettings.rdkafkaAllowUnsafe) {
            for setting in unsafeKafkaSettings { reader.problem("\(setting); refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true") }
        }

        let known = Set(ConfigurationReference.variables(plugins: linked).map(\.name))
        let unknown = environment.keys.filter {
            $0.hasPrefix("PUSH_") && !known.contains($0) && CoreSettings.removed[$0] == nil
                && !$0.hasPrefix(ConfigurationReference.rdkafkaPrefix)
        }.sorted()
        let removed = CoreSettings.removed.filter { environment[$0.key] != nil }.sorted { $0.key < $1.key }
            .map { "\($0.key) was removed and is ignored: \($0.value)" }

        var exportsTraces = false
        switch TraceExport.requested(by: environment) {
        case .success(let requested): exportsTraces = requested
        case .failure(let errors): errors.problems.forEach { reader.problem($0) }
        }

        var egressProxy: EgressProxy?
        do { egressProxy = try EgressProxy.fromEnvironment { environment[$0] } } catch { reader.problem(error.description) }

        guard reader.problems.isEmpty else { return .failure(ConfigurationErrors(problems: reader.problems)) }
        var configuration = WorkerConfiguration(
            brokers: brokers, groupId: groupId, pipeline: pipeline, rdkafkaProperties: rdkafka,
            allowedUnsafeKafkaSettings: unsafeKafkaSettings,
            maximumConnectionsPerHost: connections, operations: operations, redisURL: redisURL, redisConnections: redisConnections,
            plugins: enabled, targetFormats: linked.map(\.targetFormat),
            templates: templates, templatesReloadInterval: reloadSeconds > 0 ? .seconds(reloadSeconds) : nil,
            logLevel: level ?? .info, logFormat: format ?? .json, unknownVariables: unknown,
            removedVariables: removed,
            providerSource: providers, appsReloadInterval: appsReloadSeconds > 0 ? .seconds(appsReloadSeconds) : nil,
            providerVersion: providerVersion)
        configuration.exportsTraces = exportsTraces
        configuration.egressProxy = egressProxy
        configuration.idempotencyRetention = idempotencyRetention
        configuration.redisTLS = redisTLS
        return .success(configuration)
    }

    /// `PUSH_REDIS_CA_FILE`, `…_CERT_FILE`, `…_KEY_FILE` and `…_TLS_SERVER_NAME`: only with `rediss://`, the files read
    /// and parsed now as a connection will (they are read again for each new one).
    private static func redisTLS(url: RedisURL?, reader: inout SettingsReader) -> RedisTLSSettings {
        let settings = [CoreSettings.redisCaFile, CoreSettings.redisCertFile, CoreSettings.redisKeyFile, CoreSettings.redisTlsServerName]
        let set = settings.filter { reader.isSet($0) }
        guard url?.usesTLS == true else {
            if !set.isEmpty {
                reader.problem(
                    "\(set.map(\.name).joined(separator: ", ")) set, but PUSH_REDIS_URL is not rediss:// (TLS): use rediss:// or unset them"
                )
            }
            return RedisTLSSettings()
        }
        let caFile = CredentialFiles.tlsFile(CoreSettings.redisCaFile, reader: &reader)
        let certificateFile = CredentialFiles.tlsFile(CoreSettings.redisCertFile, reader: &reader)
        let keyFile = CredentialFiles.tlsFile(CoreSettings.redisKeyFile, reader: &reader)
        if reader.isSet(CoreSettings.redisKeyFile), !reader.isSet(CoreSettings.redisCertFile) {
            reader.problem("PUSH_REDIS_KEY_FILE is set without PUSH_REDIS_CERT_FILE: set both for mutual TLS")
        }
        let options = TLSOptions(caFile: caFile, clientCertificateFile: certificateFile, clientKeyFile: keyFile)
        _ = CredentialFiles.tls(options, place: "PUSH_REDIS_CA_FILE/CERT_FILE/KEY_FILE", reader: &reader)
        let serverName = reader.string(CoreSettings.redisTlsServerName)
        if let serverName, serverName.contains(where: { $0 == "/" || $0 == ":" || $0 == "@" || $0.isWhitespace }) {
            reader.problem("PUSH_REDIS_TLS_SERVER_NAME must be a host name, got \"\(serverName)\"")
        }
        return RedisTLSSettings(
            caFile: caFile?.path, certificateFile: certificateFile?.path, keyFile: keyFile?.path, serverName: serverName)
    }
}

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

    /// The configured plugin of `provider`, if it is enabled.
    public func plugin(_ provider: ProviderID) -> ConfiguredPlugin? { plugins.first { $0.id == provider } }

    public static func load(from environment: [String: String], requireBrokers: Bool = true,
                            plugins linked: [any ProviderPlugin] = LinkedPlugins.all) -> Result<WorkerConfiguration, ConfigurationErrors> {
        var reader = SettingsReader(environment)
        let brokers = reader.string("PUSH_KAFKA_BROKERS") ?? ""
        if requireBrokers, brokers.isEmpty { reader.problem("PUSH_KAFKA_BROKERS is required: the Kafka bootstrap servers, e.g. kafka-0:9092,kafka-1:9092") }
        let groupId = reader.string("PUSH_KAFKA_GROUP_ID") ?? "push-worker"
        var pipeline = PipelineConfiguration(
            jobsTopic: reader.string("PUSH_JOBS_TOPIC") ?? "push.jobs",
            urgentTopic: reader.string("PUSH_URGENT_TOPIC") ?? "push.jobs.urgent",
            outcomesTopic: reader.string("PUSH_OUTCOMES_TOPIC") ?? "push.outcomes",
            deadLetterTopic: reader.string("PUSH_DLQ_TOPIC") ?? "push.dlq")
        pipeline.maximumInFlightJobs = reader.integer("PUSH_MAX_IN_FLIGHT", default: 1000, in: 1...1_000_000)
        pipeline.urgentReservedInFlightJobs = reader.integer("PUSH_URGENT_RESERVED_IN_FLIGHT", default: 100, in: 0...1_000_000)
        if reader.string("PUSH_URGENT_RESERVED_IN_FLIGHT") != nil, pipeline.urgentReservedInFlightJobs > pipeline.maximumInFlightJobs / 2 {
            reader.problem("PUSH_URGENT_RESERVED_IN_FLIGHT (\(pipeline.urgentReservedInFlightJobs)) must be at most half of PUSH_MAX_IN_FLIGHT (\(pipeline.maximumInFlightJobs))")
        }
        if reader.string("PUSH_MAX_READ_AHEAD") != nil {
            let readAhead = reader.integer("PUSH_MAX_READ_AHEAD", default: 2 * pipeline.maximumInFlightJobs, in: 1...10_000_000)
            if readAhead < pipeline.maximumInFlightJobs {
                reader.problem("PUSH_MAX_READ_AHEAD (\(readAhead)) must not be below PUSH_MAX_IN_FLIGHT (\(pipeline.maximumInFlightJobs))")
            }
            pipeline.maximumReadAheadJobs = readAhead
        }
        pipeline.maximumInFlightPerApp = reader.integer("PUSH_APP_MAX_IN_FLIGHT", default: 500, in: 1...1_000_000)
        let shedLag = reader.integer("PUSH_SHED_LAG_MS", default: 0, in: 0...86_400_000)
        pipeline.shedPolicy = ShedPolicy(lagThresholdMilliseconds: shedLag > 0 ? Int64(shedLag) : nil)
        pipeline.jobLimits.maximumBytes = reader.integer("PUSH_MAX_JOB_BYTES", default: 131_072, in: 1024...10_485_760)
        let retryBase = reader.integer("PUSH_RETRY_BASE_MS", default: 1000, in: 1...3_600_000)
        let retryMaximum = reader.integer("PUSH_RETRY_MAX_MS", default: 60_000, in: 1...86_400_000)
        if retryMaximum < retryBase { reader.problem("PUSH_RETRY_MAX_MS (\(retryMaximum)) must not be below PUSH_RETRY_BASE_MS (\(retryBase))") }
        pipeline.retryPolicy = RetryPolicy(baseMilliseconds: Int64(retryBase), maximumMilliseconds: Int64(retryMaximum),
                                           maximumAttempts: reader.integer("PUSH_MAX_ATTEMPTS", default: 5, in: 1...100))
        pipeline.shutdownGrace = .seconds(reader.integer("PUSH_SHUTDOWN_GRACE_S", default: 20, in: 0...3600))
        for kind in JobKind.allCases {
            let name = "PUSH_DEDUPE_WINDOW_\(kind.rawValue.uppercased())_MS"
            let fallback = Int(DedupeWindows.default.window(for: kind))
            pipeline.dedupeWindows.milliseconds[kind] = Int64(reader.integer(name, default: fallback, in: 0...86_400_000))
        }
        pipeline.idempotencyRetention = .seconds(reader.integer("PUSH_IDEMPOTENCY_TTL_S", default: 86_400, in: 60...2_592_000))
        pipeline.retryLease = .milliseconds(reader.integer("PUSH_RETRY_LEASE_MS", default: 30_000, in: 1000...3_600_000))
        pipeline.publishRetryingOutcomes = reader.boolean("PUSH_PUBLISH_RETRYING", default: false)
        pipeline.circuitBreaker = CircuitBreaker.Settings(
            failureThreshold: reader.integer("PUSH_CIRCUIT_FAILURES", default: 50, in: 1...100_000),
            coolDownMilliseconds: Int64(reader.integer("PUSH_CIRCUIT_COOLDOWN_MS", default: 30_000, in: 100...3_600_000)))
        var redisURL: RedisURL?
        if let text = reader.string("PUSH_REDIS_URL") {
            redisURL = RedisURL(text)
            if redisURL == nil { reader.problem("PUSH_REDIS_URL must look like redis://[:password@]host:port/db, got \"\(RedisURL.masked(text))\"") }
        }
        let redisConnections = reader.integer("PUSH_REDIS_CONNECTIONS", default: 4, in: 1...64)
        let connections = reader.integer("PUSH_HTTP_MAX_CONNECTIONS", default: 2, in: 1...64)
        let bindAddress = reader.string("PUSH_HTTP_BIND") ?? "0.0.0.0"
        if !OperationsEndpoint.isBindableAddress(bindAddress) {
            reader.problem("PUSH_HTTP_BIND must be an IPv4 or IPv6 address to listen on, e.g. 0.0.0.0, 127.0.0.1 or ::, got \"\(bindAddress)\"")
        }
        let operations = OperationsEndpoint(
            bindAddress: bindAddress,
            port: reader.integer("PUSH_HTTP_PORT", default: 9090, in: 0...65535),
            idleTimeout: .seconds(reader.integer("PUSH_HTTP_IDLE_TIMEOUT_S", default: 60, in: 1...3600)),
            maximumConnections: reader.integer("PUSH_HTTP_MAX_INBOUND_CONNECTIONS", default: 32, in: 1...10_000))

        let sections = Set(linked.compactMap(\.appsFileSection))
        let appsFile = reader.string("PUSH_APPS_FILE").map { AppsFile.load(path: $0, sections: sections, reader: &reader) } ?? [:]
        var configured: [ConfiguredPlugin] = []
        for plugin in linked {
            if let ready = plugin.configure(&reader, apps: plugin.appsFileSection.flatMap { appsFile[$0] } ?? []) {
                configured.append(ready)
            }
        }

        var templates: TemplateDirectory?
        if let path = reader.string("PUSH_TEMPLATES_DIR") {
            switch TemplateDirectory.load(path: path, shapes: linked.compactMap(\.templateShape)) {
            case .success(let loaded): templates = loaded
            case .failure(let problems): for line in problems.lines { reader.problem("PUSH_TEMPLATES_DIR: \(line)") }
            }
        }
        let reloadSeconds = reader.integer("PUSH_TEMPLATES_RELOAD_S", default: 5, in: 0...3600)

        var enabled = configured
        if let list = reader.string("PUSH_PROVIDERS") {
            let names = list.split(separator: ",").map { ProviderID($0.trimmingCharacters(in: .whitespaces)) }.filter { !$0.rawValue.isEmpty }
            enabled = configured.filter { names.contains($0.id) }
            for name in names {
                if let plugin = linked.first(where: { $0.id == name }) {
                    if !configured.contains(where: { $0.id == name }) {
                        reader.problem("PUSH_PROVIDERS enables \(name) but it is not configured: set \(plugin.configuredBy)")
                    }
                } else {
                    reader.problem("PUSH_PROVIDERS names \"\(name)\", which is not one of \(linked.map(\.id.rawValue).joined(separator: ", "))")
                }
            }
        }
        if enabled.isEmpty, requireBrokers {
            reader.problem("no provider is configured; set one of: " + linked.map(\.configuredBy).joined(separator: "; ") + " (see push-worker run --help)")
        }

        let levelName = reader.string("PUSH_LOG_LEVEL") ?? "info"
        let level = Logger.Level(rawValue: levelName)
        if level == nil { reader.problem("PUSH_LOG_LEVEL must be one of \(Logger.Level.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(levelName)\"") }
        let formatName = reader.string("PUSH_LOG_FORMAT") ?? "json"
        let format = LogFormat(rawValue: formatName)
        if format == nil { reader.problem("PUSH_LOG_FORMAT must be json or text, got \"\(formatName)\"") }

        var rdkafka: [String: String] = [:]
        for (name, value) in environment where name.hasPrefix(ConfigurationReference.rdkafkaPrefix) && name != "PUSH_RDKAFKA_ALLOW_UNSAFE" {
            let property = name.dropFirst(ConfigurationReference.rdkafkaPrefix.count).lowercased().replacingOccurrences(of: "_", with: ".")
            guard !property.isEmpty else { continue }
            rdkafka[property] = value
        }
        for property in ["enable.auto.offset.store", "group.id", "bootstrap.servers"] where rdkafka[property] != nil {
            reader.problem("\(ConfigurationReference.rdkafkaVariable(for: property)) cannot be overridden: the worker manages \(property) itself")
        }
        let unsafeKafkaSettings = UnsafeKafkaProperty.settings(in: rdkafka)
        if !reader.boolean("PUSH_RDKAFKA_ALLOW_UNSAFE", default: false) {
            for setting in unsafeKafkaSettings { reader.problem("\(setting); refused unless PUSH_RDKAFKA_ALLOW_UNSAFE=true") }
        }

        let known = Set(ConfigurationReference.variables(plugins: linked).map(\.name))
        let unknown = environment.keys.filter { $0.hasPrefix("PUSH_") && !known.contains($0) && !$0.hasPrefix(ConfigurationReference.rdkafkaPrefix) }.sorted()

        guard reader.problems.isEmpty else { return .failure(ConfigurationErrors(problems: reader.problems)) }
        return .success(WorkerConfiguration(
            brokers: brokers, groupId: groupId, pipeline: pipeline, rdkafkaProperties: rdkafka,
            allowedUnsafeKafkaSettings: unsafeKafkaSettings,
            maximumConnectionsPerHost: connections, operations: operations, redisURL: redisURL, redisConnections: redisConnections, plugins: enabled, targetFormats: linked.map(\.targetFormat),
            templates: templates, templatesReloadInterval: reloadSeconds > 0 ? .seconds(reloadSeconds) : nil,
            logLevel: level ?? .info, logFormat: format ?? .json, unknownVariables: unknown))
    }
}

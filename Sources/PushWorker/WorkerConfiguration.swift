import APNsPlugin
import FCMPlugin
import PushCrypto
import WebPushPlugin
import Foundation
import Logging
import ProxyPlugin
import PushCore
import PushHTTP
import PushPipeline
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
    public var proxy: ProxyConfiguration?
    public var apns: APNsConfiguration?
    public var fcm: FCMConfiguration?
    public var webPush: WebPushConfiguration?
    public var enabledProviders: Set<ProviderID>
    /// Payload templates from `PUSH_TEMPLATES_DIR`; nil = built-in payloads only.
    public var templates: TemplateDirectory?
    /// How often the templates are re-read (`PUSH_TEMPLATES_RELOAD_S`); nil = never.
    public var templatesReloadInterval: Duration?
    public var logLevel: Logger.Level
    public var logFormat: LogFormat
    /// Variables that look like ours but are not (typos).
    public var unknownVariables: [String]

    public static func load(from environment: [String: String],
                            requireBrokers: Bool = true) -> Result<WorkerConfiguration, ConfigurationErrors> {
        var reader = EnvironmentReader(environment)
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

        var proxy: ProxyConfiguration?
        if let url = reader.string("PUSH_PROXY_URL") {
            if URL(string: url)?.scheme != "https" || URL(string: url)?.host == nil {
                reader.problem("PUSH_PROXY_URL must be an https:// URL, got \"\(url)\"")
            }
            let tls = TLSOptions(caFile: reader.readableFile("PUSH_PROXY_CA_FILE"),
                                 clientCertificateFile: reader.readableFile("PUSH_PROXY_CERT_FILE"),
                                 clientKeyFile: reader.readableFile("PUSH_PROXY_KEY_FILE"))
            if (reader.string("PUSH_PROXY_CERT_FILE") == nil) != (reader.string("PUSH_PROXY_KEY_FILE") == nil) {
                reader.problem("PUSH_PROXY_CERT_FILE and PUSH_PROXY_KEY_FILE must be set together")
            }
            proxy = ProxyConfiguration(url: url, tls: tls,
                                       timeout: .milliseconds(reader.integer("PUSH_PROXY_TIMEOUT_MS", default: 10_000, in: 100...300_000)))
        } else {
            for dependent in ["PUSH_PROXY_CA_FILE", "PUSH_PROXY_CERT_FILE", "PUSH_PROXY_KEY_FILE", "PUSH_PROXY_TIMEOUT_MS"]
            where reader.string(dependent) != nil {
                reader.problem("\(dependent) is set but PUSH_PROXY_URL is not")
            }
        }

        let appsFile = reader.string("PUSH_APPS_FILE").map { AppsFile.load(path: $0, reader: &reader) } ?? AppsFile.Apps()
        let apns = loadAPNs(&reader, fromFile: appsFile.apns)
        let fcm = loadFCM(&reader, fromFile: appsFile.fcm)
        let webPush = loadWebPush(&reader)

        var templates: TemplateDirectory?
        if let path = reader.string("PUSH_TEMPLATES_DIR") {
            switch TemplateDirectory.load(path: path) {
            case .success(let loaded): templates = loaded
            case .failure(let problems): for line in problems.lines { reader.problem("PUSH_TEMPLATES_DIR: \(line)") }
            }
        }
        let reloadSeconds = reader.integer("PUSH_TEMPLATES_RELOAD_S", default: 5, in: 0...3600)

        var configured = Set<ProviderID>()
        if proxy != nil { configured.insert(.proxy) }
        if apns != nil { configured.insert(.apns) }
        if fcm != nil { configured.insert(.fcm) }
        if webPush != nil { configured.insert(.webpush) }
        var enabled = configured
        if let list = reader.string("PUSH_PROVIDERS") {
            enabled = []
            for name in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
                guard let provider = ProviderID(rawValue: name) else {
                    reader.problem("PUSH_PROVIDERS names \"\(name)\", which is not one of \(ProviderID.allCases.map(\.rawValue).joined(separator: ", "))")
                    continue
                }
                if configured.contains(provider) {
                    enabled.insert(provider)
                } else if provider == .proxy {
                    reader.problem("PUSH_PROVIDERS enables proxy but PUSH_PROXY_URL is not set")
                } else if provider == .apns {
                    reader.problem("PUSH_PROVIDERS enables apns but neither PUSH_APNS_KEY_FILE nor an apns section in PUSH_APPS_FILE is set")
                } else if provider == .fcm {
                    reader.problem("PUSH_PROVIDERS enables fcm but neither PUSH_FCM_CREDENTIALS_FILE nor an fcm section in PUSH_APPS_FILE is set")
                } else {
                    reader.problem("PUSH_PROVIDERS enables webpush but PUSH_WEBPUSH_VAPID_KEY_FILE is not set")
                }
            }
        }
        if enabled.isEmpty, requireBrokers {
            reader.problem("no provider is configured: set PUSH_APNS_KEY_FILE (with PUSH_APNS_KEY_ID, PUSH_APNS_TEAM_ID, PUSH_APNS_BUNDLE_ID), PUSH_FCM_CREDENTIALS_FILE, PUSH_WEBPUSH_VAPID_KEY_FILE, PUSH_APPS_FILE or PUSH_PROXY_URL (see push-worker run --help)")
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

        let known = Set(ConfigurationReference.variables.map(\.name))
        let unknown = environment.keys.filter { $0.hasPrefix("PUSH_") && !known.contains($0) && !$0.hasPrefix(ConfigurationReference.rdkafkaPrefix) }.sorted()

        guard reader.problems.isEmpty else { return .failure(ConfigurationErrors(problems: reader.problems)) }
        return .success(WorkerConfiguration(
            brokers: brokers, groupId: groupId, pipeline: pipeline, rdkafkaProperties: rdkafka,
            allowedUnsafeKafkaSettings: unsafeKafkaSettings,
            maximumConnectionsPerHost: connections, operations: operations, redisURL: redisURL, redisConnections: redisConnections, proxy: proxy, apns: apns, fcm: fcm, webPush: webPush, enabledProviders: enabled,
            templates: templates, templatesReloadInterval: reloadSeconds > 0 ? .seconds(reloadSeconds) : nil,
            logLevel: level ?? .info, logFormat: format ?? .json, unknownVariables: unknown))
    }
}

extension WorkerConfiguration {
    /// APNs apps from the single-app shortcut and `PUSH_APPS_FILE`, plus endpoint overrides.
    /// The VAPID key and Web Push policy.
    static func loadWebPush(_ reader: inout EnvironmentReader) -> WebPushConfiguration? {
        let dependents = ["PUSH_WEBPUSH_VAPID_SUBJECT", "PUSH_WEBPUSH_CA_FILE", "PUSH_WEBPUSH_ALLOW_PRIVATE", "PUSH_WEBPUSH_ALLOWED_HOSTS",
                          "PUSH_WEBPUSH_ALLOWED_NETWORKS", "PUSH_WEBPUSH_ALLOWED_PORTS", "PUSH_WEBPUSH_MAX_IN_FLIGHT_PER_ORIGIN"]
        guard let path = reader.string("PUSH_WEBPUSH_VAPID_KEY_FILE") else {
            for variable in dependents where reader.string(variable) != nil {
                reader.problem("\(variable) is set but PUSH_WEBPUSH_VAPID_KEY_FILE is not")
            }
            return nil
        }
        let key: PrivateKey
        do {
            key = try VAPIDKeyFile.load(path)
        } catch {
            reader.problem("PUSH_WEBPUSH_VAPID_KEY_FILE: \(error)")
            return nil
        }
        guard let subject = reader.string("PUSH_WEBPUSH_VAPID_SUBJECT"), subject.hasPrefix("mailto:") || subject.hasPrefix("https:") else {
            reader.problem("PUSH_WEBPUSH_VAPID_SUBJECT is required with a VAPID key: a mailto: or https: contact for push services")
            return nil
        }
        func list(_ name: String) -> [String] {
            (reader.string(name) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        let hosts = list("PUSH_WEBPUSH_ALLOWED_HOSTS").map { $0.lowercased() }
        var networks: [IPNetwork] = []
        for text in list("PUSH_WEBPUSH_ALLOWED_NETWORKS") {
            guard let network = IPNetwork(text) else {
                reader.problem("PUSH_WEBPUSH_ALLOWED_NETWORKS: \"\(text)\" is not a CIDR block such as 10.20.0.0/16 or fd00::/8")
                continue
            }
            networks.append(network)
        }
        var ports: Set<Int> = []
        for text in list("PUSH_WEBPUSH_ALLOWED_PORTS") {
            guard let port = Int(text), (1...65_535).contains(port) else {
                reader.problem("PUSH_WEBPUSH_ALLOWED_PORTS: \"\(text)\" is not a port (1-65535)")
                continue
            }
            ports.insert(port)
        }
        return WebPushConfiguration(vapidKey: key, subject: subject, caFile: reader.readableFile("PUSH_WEBPUSH_CA_FILE"),
                                    allowPrivateNetworks: reader.boolean("PUSH_WEBPUSH_ALLOW_PRIVATE", default: false),
                                    allowedNetworks: networks, allowedHosts: hosts, allowedPorts: ports.isEmpty ? [443] : ports,
                                    maximumInFlightPerOrigin: reader.integer("PUSH_WEBPUSH_MAX_IN_FLIGHT_PER_ORIGIN", default: 100, in: 1...100_000))
    }

    /// FCM projects from `PUSH_FCM_CREDENTIALS_FILE` and `PUSH_APPS_FILE`, plus endpoint overrides.
    static func loadFCM(_ reader: inout EnvironmentReader, fromFile: [ServiceAccount]) -> FCMConfiguration? {
        var accounts: [ServiceAccount] = []
        var defaultProject: String?
        if let path = reader.string("PUSH_FCM_CREDENTIALS_FILE"),
           let account = CredentialCheck.serviceAccount(at: path, place: "PUSH_FCM_CREDENTIALS_FILE", reader: &reader) {
            accounts.append(account)
            defaultProject = account.projectId
        }
        accounts += fromFile
        for project in Dictionary(grouping: accounts, by: \.projectId).filter({ $0.value.count > 1 }).keys.sorted() {
            reader.problem("FCM project \(project) is configured twice")
        }
        guard !accounts.isEmpty else {
            for variable in ["PUSH_FCM_ENDPOINT", "PUSH_FCM_CA_FILE"] where reader.string(variable) != nil {
                reader.problem("\(variable) is set but no FCM service account is configured")
            }
            return nil
        }
        var configuration = FCMConfiguration(accounts: accounts, defaultProjectId: defaultProject,
                                             caFile: reader.readableFile("PUSH_FCM_CA_FILE"))
        if let endpoint = reader.string("PUSH_FCM_ENDPOINT") {
            if URL(string: endpoint)?.scheme != "https" { reader.problem("PUSH_FCM_ENDPOINT must be an https:// URL, got \"\(endpoint)\"") }
            configuration.endpoint = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        }
        return configuration
    }

    static func loadAPNs(_ reader: inout EnvironmentReader, fromFile: [APNsApp]) -> APNsConfiguration? {
        var apps: [APNsApp] = []
        let shortcut = ["PUSH_APNS_KEY_FILE", "PUSH_APNS_KEY_ID", "PUSH_APNS_TEAM_ID", "PUSH_APNS_BUNDLE_ID"]
        let given = shortcut.filter { reader.string($0) != nil }
        if !given.isEmpty {
            if given.count < shortcut.count {
                let missing = shortcut.filter { reader.string($0) == nil }.joined(separator: ", ")
                reader.problem("APNs token auth needs PUSH_APNS_KEY_FILE, PUSH_APNS_KEY_ID, PUSH_APNS_TEAM_ID and PUSH_APNS_BUNDLE_ID together; missing: \(missing)")
            } else if let keyFile = reader.string("PUSH_APNS_KEY_FILE"), let keyId = reader.string("PUSH_APNS_KEY_ID"),
                      let teamId = reader.string("PUSH_APNS_TEAM_ID"), let bundleId = reader.string("PUSH_APNS_BUNDLE_ID") {
                if keyId.count != 10 { reader.problem("PUSH_APNS_KEY_ID must be the 10-character key id Apple shows, got \"\(keyId)\"") }
                if teamId.count != 10 { reader.problem("PUSH_APNS_TEAM_ID must be the 10-character team id, got \"\(teamId)\"") }
                if CredentialCheck.signingKey(at: keyFile, place: "PUSH_APNS_KEY_FILE", reader: &reader) {
                    var cancelPushType = APNsPushType.voip
                    if let name = reader.string("PUSH_APNS_CANCEL_PUSH_TYPE") {
                        if let type = APNsPushType(rawValue: name), APNsApp.cancelPushTypes.contains(type) {
                            cancelPushType = type
                        } else {
                            reader.problem("PUSH_APNS_CANCEL_PUSH_TYPE must be voip or alert, got \"\(name)\"")
                        }
                    }
                    apps.append(APNsApp(bundleId: bundleId, authentication: .token(keyFile: keyFile, keyId: keyId, teamId: teamId),
                                        topicOverride: reader.string("PUSH_APNS_TOPIC"), cancelPushType: cancelPushType))
                }
            }
        }
        apps += fromFile
        let duplicates = Dictionary(grouping: apps, by: \.bundleId).filter { $0.value.count > 1 }.keys.sorted()
        for bundleId in duplicates { reader.problem("APNs app \(bundleId) is configured twice") }
        guard !apps.isEmpty else {
            for variable in ["PUSH_APNS_HOST", "PUSH_APNS_PORT", "PUSH_APNS_CA_FILE", "PUSH_APNS_TOPIC", "PUSH_APNS_CANCEL_PUSH_TYPE"] where reader.string(variable) != nil {
                reader.problem("\(variable) is set but no APNs app is configured")
            }
            return nil
        }
        var configuration = APNsConfiguration(apps: apps, defaultBundleId: reader.string("PUSH_APNS_BUNDLE_ID"),
                                              caFile: reader.readableFile("PUSH_APNS_CA_FILE"))
        if let host = reader.string("PUSH_APNS_HOST") {
            let port = reader.integer("PUSH_APNS_PORT", default: 443, in: 1...65535)
            configuration.productionURL = "https://\(host):\(port)"
            configuration.sandboxURL = configuration.productionURL
        } else if reader.string("PUSH_APNS_PORT") != nil {
            let port = reader.integer("PUSH_APNS_PORT", default: 443, in: 1...65535)
            configuration.productionURL = "https://api.push.apple.com:\(port)"
            configuration.sandboxURL = "https://api.sandbox.push.apple.com:\(port)"
        }
        return configuration
    }
}

/// Reads variables and collects one problem line per bad value.
struct EnvironmentReader {
    private let environment: [String: String]
    private(set) var problems: [String] = []

    init(_ environment: [String: String]) { self.environment = environment }

    mutating func problem(_ line: String) { problems.append(line) }

    func string(_ name: String) -> String? {
        guard let value = environment[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    mutating func integer(_ name: String, default defaultValue: Int, in range: ClosedRange<Int>) -> Int {
        guard let text = string(name) else { return defaultValue }
        guard let value = Int(text), range.contains(value) else {
            problem("\(name) must be an integer in \(range.lowerBound)...\(range.upperBound), got \"\(text)\"")
            return defaultValue
        }
        return value
    }

    mutating func boolean(_ name: String, default defaultValue: Bool) -> Bool {
        guard let text = string(name) else { return defaultValue }
        switch text.lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default:
            problem("\(name) must be true or false, got \"\(text)\"")
            return defaultValue
        }
    }

    mutating func readableFile(_ name: String) -> String? {
        guard let path = string(name) else { return nil }
        guard FileManager.default.isReadableFile(atPath: path) else {
            problem("\(name) points to \(path), which does not exist or is not readable")
            return nil
        }
        return path
    }
}

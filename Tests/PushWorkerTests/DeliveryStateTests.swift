import Logging
import PushRedis
import PushSandbox
import Metrics
import Prometheus
import Synchronization
import Testing

@testable import PushWorker

/// The lines a logger wrote, and the logger.
private final class LogCapture: Sendable {
    let lines = Mutex<[(level: Logger.Level, message: String)]>([])
    var logger: Logger { Logger(label: "test") { [self] _ in Handler(capture: self) } }
    var warnings: [String] { lines.withLock { $0.filter { $0.level == .warning }.map(\.message) } }

    private struct Handler: LogHandler {
        let capture: LogCapture
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) { capture.lines.withLock { $0.append((event.level, "\(event.message)")) } }
    }
}

@Suite("Where the worker keeps dedupe, idempotency and retries")
struct DeliveryStateTests {
    static let environment = ["PUSH_KAFKA_BROKERS": "127.0.0.1:9", "PUSH_PROXY_URL": "https://proxy.example.com/push"]

    /// `push_store_shared` as `state` reports it, in a registry of the test's own (the process-wide one is shared
    /// with every other test that builds a worker).
    static func storeShared(_ state: DeliveryState) -> Double? {
        let registry = PrometheusCollectorRegistry()
        state.report(to: PrometheusMetricsFactory(registry: registry))
        let line = registry.emitToString().split(separator: "\n").first { $0.hasPrefix("push_store_shared ") }
        return line.flatMap { Double($0.dropFirst("push_store_shared ".count)) }
    }

    @Test("without PUSH_REDIS_URL the worker says at start-up, in a warning and in push_store_shared 0, that its state is in memory")
    func inMemoryStateIsAnnounced() throws {
        let configuration = try WorkerConfiguration.load(from: Self.environment).get()
        let capture = LogCapture()
        let state = DeliveryState(configuration, logger: capture.logger)
        #expect(!state.isShared)
        #expect(state.retryQueue == nil)
        #expect(capture.warnings.count == 1)
        #expect(capture.warnings.first?.contains("PUSH_REDIS_URL is not set") == true)
        #expect(capture.warnings.first?.contains("in memory") == true)
        #expect(Self.storeShared(state) == 0)
        let worker = try Worker(configuration: configuration, logger: capture.logger)
        #expect(!worker.storeIsShared)
    }

    @Test("with PUSH_REDIS_URL the state is shared through Redis: no warning, push_store_shared 1")
    func redisStateIsShared() throws {
        var environment = Self.environment
        environment["PUSH_REDIS_URL"] = "redis://127.0.0.1:9/0"
        let configuration = try WorkerConfiguration.load(from: environment).get()
        let capture = LogCapture()
        let state = DeliveryState(configuration, logger: capture.logger)
        #expect(state.isShared)
        #expect(capture.warnings.isEmpty)
        #expect(Self.storeShared(state) == 1)
        let worker = try Worker(configuration: configuration, logger: capture.logger)
        #expect(worker.storeIsShared)
    }
}

@Suite("Redis over TLS in the configuration: rediss://, its files and the name verified")
struct RedisTLSConfigurationTests {
    static let base = ["PUSH_KAFKA_BROKERS": "127.0.0.1:9", "PUSH_PROXY_URL": "https://proxy.example.com/push"]

    @Test(
        "rediss:// with a CA, a client certificate and its key, and a server name loads; the files are checked as connections will use them"
    )
    func tlsSettingsLoad() throws {
        let material = try RedisTLSMaterial.make()
        defer { material.remove() }
        var environment = Self.base
        environment["PUSH_REDIS_URL"] = "rediss://worker:pw@10.0.0.1:6380,10.0.0.2:6380/0"
        environment["PUSH_REDIS_CA_FILE"] = material.caFile
        environment["PUSH_REDIS_CERT_FILE"] = material.clientCertFile
        environment["PUSH_REDIS_KEY_FILE"] = material.clientKeyFile
        environment["PUSH_REDIS_TLS_SERVER_NAME"] = "redis.push.test"
        let configuration = try WorkerConfiguration.load(from: environment).get()
        #expect(configuration.redisURL?.usesTLS == true)
        #expect(
            configuration.redisTLS
                == RedisTLSSettings(
                    caFile: material.caFile, certificateFile: material.clientCertFile, keyFile: material.clientKeyFile,
                    serverName: "redis.push.test"))
    }

    @Test("TLS files with a plain redis:// URL, a key without its certificate, a CA file that is no certificate: one line each")
    func tlsSettingsRefused() throws {
        let material = try RedisTLSMaterial.make()
        defer { material.remove() }
        var plain = Self.base
        plain["PUSH_REDIS_URL"] = "redis://127.0.0.1:6379/0"
        plain["PUSH_REDIS_CA_FILE"] = material.caFile
        #expect(
            problems(plain) == [
                "PUSH_REDIS_CA_FILE set, but PUSH_REDIS_URL is not rediss:// (TLS): use rediss:// or unset them"
            ])
        var keyOnly = Self.base
        keyOnly["PUSH_REDIS_URL"] = "rediss://127.0.0.1:6380/0"
        keyOnly["PUSH_REDIS_KEY_FILE"] = material.clientKeyFile
        #expect(problems(keyOnly) == ["PUSH_REDIS_KEY_FILE is set without PUSH_REDIS_CERT_FILE: set both for mutual TLS"])
        var notACertificate = Self.base
        notACertificate["PUSH_REDIS_URL"] = "rediss://127.0.0.1:6380/0"
        notACertificate["PUSH_REDIS_CA_FILE"] = material.clientKeyFile
        let lines = problems(notACertificate)
        #expect(lines.count == 1 && lines[0].hasPrefix("PUSH_REDIS_CA_FILE/CERT_FILE/KEY_FILE: "), "\(lines)")
    }
}

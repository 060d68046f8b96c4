import Logging
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

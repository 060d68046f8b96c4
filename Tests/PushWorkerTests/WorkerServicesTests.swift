import Logging
import Prometheus
import Testing

@testable import PushWorker

@Suite("The worker's services: started in order, stopped in reverse at a graceful shutdown")
struct WorkerServicesTests {
    static let environment = [
        "PUSH_KAFKA_BROKERS": "127.0.0.1:9", "PUSH_PROXY_URL": "https://proxy.example.com/push",
        "PUSH_REDIS_URL": "redis://127.0.0.1:9/0",
    ]

    @Test(
        "the watchers stop first, then the pipeline drains, then the retries stop, then the provider connections and the producer close, then the operations endpoint, and the log writer writes last"
    )
    func shutdownOrder() async throws {
        let configuration = try WorkerConfiguration.load(from: Self.environment).get()
        let worker = try Worker(configuration: configuration, logger: Logger(label: "test"))
        let operations = try await OperationsServerTests.start(OperationsServerTests.endpoint())
        let started = worker.services(operations: operations, logOutput: LogLineOutput(descriptor: -1), reloadsOnHangUp: true)
            .map(\.serviceName)
        await operations.stop()
        #expect(
            started == [
                "log writer", "operations endpoint", "outcome producer", "provider connections", "retry scheduler", "delivery pipeline",
                "apps watcher",
            ])
    }

    @Test("without Redis there is no retry scheduler; without PUSH_APPS_RELOAD_S or SIGHUP no apps watcher")
    func optionalServices() async throws {
        var environment = Self.environment
        environment["PUSH_REDIS_URL"] = nil
        environment["PUSH_APPS_RELOAD_S"] = "0"
        let worker = try Worker(configuration: try WorkerConfiguration.load(from: environment).get(), logger: Logger(label: "test"))
        #expect(worker.services().map(\.serviceName) == ["outcome producer", "provider connections", "delivery pipeline"])
    }
}

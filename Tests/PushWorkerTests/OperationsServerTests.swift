import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Prometheus
import Synchronization
import Testing
@testable import PushWorker

@Suite("Operations endpoint: /metrics, /healthz, /readyz")
struct OperationsServerTests {
    func get(_ port: Int, _ path: String) async throws -> (Int, String) {
        let (data, response) = try await URLSession.shared.data(from: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, String(decoding: data, as: UTF8.self))
    }

    @Test("metrics in Prometheus text format; readiness answers 503 with its reason until ready; unknown paths 404")
    func endpoints() async throws {
        let registry = PrometheusCollectorRegistry()
        registry.makeCounter(name: "push_example_total", labels: [("provider", "apns")]).increment(by: Int64(3))
        let ready = Atomic<Bool>(false)
        let server = try await OperationsServer.start(host: "127.0.0.1", port: 0, registry: registry,
                                                      liveness: { (true, "alive") },
                                                      readiness: { ready.load(ordering: .relaxed) ? (true, "ready") : (false, "not yet joined the consumer group") })
        let (metricsStatus, metrics) = try await get(server.port, "/metrics")
        #expect(metricsStatus == 200)
        #expect(metrics.contains(#"push_example_total{provider="apns"} 3"#))
        #expect(try await get(server.port, "/healthz") == (200, "alive\n"))
        #expect(try await get(server.port, "/readyz") == (503, "not yet joined the consumer group\n"))
        ready.store(true, ordering: .relaxed)
        #expect(try await get(server.port, "/readyz") == (200, "ready\n"))
        #expect(try await get(server.port, "/nope").0 == 404)
        await server.stop()
    }
}

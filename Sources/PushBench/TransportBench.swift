import Foundation
import PushCore
import PushHTTP
import Synchronization

/// `push-worker-dev bench --scenario transport`: the HTTP/2 client alone, behind `HTTPTransport`, sending
/// the request h2load sends in scripts/bench.sh (an APNs alert POST of 300 B) with as many requests in
/// flight as h2load (`-c C -m 100`): what the client costs without Kafka, Redis or a job.
public enum TransportBench {
    public struct Options: Sendable {
        public var requests = 200_000
        public var connections = 4
        public var endpoint = ""
        public var caFile: String?
        public init() {}
    }

    public struct Report: Sendable, Codable {
        public let client: String
        public let requests: Int
        public let failures: Int
        public let connections: Int
        public let seconds: Double
        public let requestsPerSecond: Double
        public let cpuMicrosecondsPerRequest: Double
        public let peakResidentMB: Double

        public func table() -> String {
            """
            client                   \(client)
            requests                 \(requests) (\(failures) failed), \(connections) connections × 100 streams
            throughput               \(Int(requestsPerSecond)) requests/s over \(String(format: "%.2f", seconds)) s
            CPU per request          \(String(format: "%.1f", cpuMicrosecondsPerRequest)) µs (whole process)
            peak RSS                 \(String(format: "%.1f", peakResidentMB)) MB
            """
        }
    }

    static let body = Array(
        #"{"aps":{"alert":{"title":"Bob","body":"Are we still on for lunch at noon? I booked the table by the window."},"sound":"default","badge":3},"chatId":"chat-42","messageId":"m-123456","pad":"\#(String(repeating: "x", count: 110))"}"#
            .utf8)

    public static func run(_ options: Options) async throws -> Report {
        let transport = NIOHTTP2Transport(
            configuration: HTTPTransportConfiguration(maximumConnectionsPerHost: options.connections), name: "bench")
        defer { transport.shutdown() }
        let request = HTTPRequest(
            url: options.endpoint + "/3/device/be" + String(repeating: "0", count: 60) + "2a",
            headers: [("apns-topic", "com.example.chat"), ("apns-push-type", "alert"), ("apns-priority", "10")],
            body: body, tls: TLSOptions(caFile: options.caFile))
        // Warm-up: the connections open and the first requests run before the clock starts.
        _ = try await transport.send(request)
        ProcessResources.resetPeak()
        let workers = options.connections * 100
        let next = Counter()
        let cpuBefore = ProcessResources.cpuSeconds()
        let started = ContinuousClock.now
        let failures = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<workers {
                group.addTask {
                    var failed = 0
                    while next.take(below: options.requests) {
                        do throws(HTTPTransportError) {
                            if try await transport.send(request).status != 200 { failed += 1 }
                        } catch {
                            failed += 1
                        }
                    }
                    return failed
                }
            }
            return await group.reduce(0, +)
        }
        let seconds = (ContinuousClock.now - started).seconds
        let cpu = ProcessResources.cpuSeconds() - cpuBefore
        return Report(
            client: HTTP2FramingKind.nghttp2.library, requests: options.requests, failures: failures, connections: options.connections,
            seconds: seconds,
            requestsPerSecond: Double(options.requests) / seconds, cpuMicrosecondsPerRequest: cpu * 1e6 / Double(options.requests),
            peakResidentMB: Double(ProcessResources.peakResidentBytes()) / 1e6)
    }
}

/// Hands out request numbers to the workers.
private final class Counter: Sendable {
    private let value = Atomic(0)

    func take(below limit: Int) -> Bool {
        value.add(1, ordering: .relaxed).oldValue < limit
    }
}

import PushCore
import PushHTTP
import Synchronization
import Testing
@testable import ProxyPlugin

@Suite("Push-proxy endpoint gathering")
struct EndpointGatheringTests {
    /// Answers 200 to every request and keeps each request's `userId` and endpoint ids.
    final class RecordingTransport: HTTPTransport {
        let requests = Mutex<[(userId: String, endpoints: [String])]>([])

        func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
            let entity = try? JSONParser.parse(request.body)
            var userId = ""
            if case .string(let id)? = entity?["userId"] { userId = id }
            var endpoints: [String] = []
            if case .array(let data)? = entity?["endpointData"] {
                endpoints = data.compactMap { if case .string(let id)? = $0["endpointId"] { id } else { nil } }
            }
            requests.withLock { $0.append((userId, endpoints.sorted())) }
            return HTTPResponse(status: 200, headers: [], body: [])
        }

        func closeConnections(except live: Set<ConnectionIdentity>) {}
        func shutdown() {}
    }

    static func job(id: String, userId: String, bindings: [String]) -> [Delivery] {
        let targets = bindings.map { Target.proxy($0, token: "tok-\($0)", tokenType: "fcm", platform: "android") }
        let job = Job(
            id: id, createdAt: ProxyProviderTests.now - 1000, ttl: 30, kind: .message, priority: .high, userId: userId,
            body: "for \(userId) only", targets: targets)
        return targets.map { Delivery(job: job, target: $0, attempt: 1, now: ProxyProviderTests.now) }
    }

    @Test(
        "two jobs in flight that reuse one id are gathered apart: a user's request carries only that user's endpoints"
    )
    func jobsReusingAnIdAreNotMixed() async {
        let transport = RecordingTransport()
        let provider = ProxyProvider(
            configuration: ProxyConfiguration(
                defaultEndpoint: ProxyEndpoint(url: "https://proxy.example/push"), gatheringWindow: .seconds(5)),
            transport: transport)
        let alice = Self.job(id: "reused", userId: "alice", bindings: ["alice-phone", "alice-tablet"])
        let bob = Self.job(id: "reused", userId: "bob", bindings: ["bob-phone", "bob-tablet"])
        // Interleaved, as two partitions' jobs arrive: alice's first target, bob's first, then the second ones.
        await withTaskGroup(of: Void.self) { group in
            for delivery in [alice[0], bob[0], alice[1], bob[1]] {
                group.addTask { #expect(await provider.deliver(delivery) == .delivered(providerMessageId: nil, httpStatus: 200)) }
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        let requests = transport.requests.withLock { $0 }.sorted { $0.userId < $1.userId }
        #expect(requests.map(\.userId) == ["alice", "bob"])
        #expect(requests.map(\.endpoints) == [["alice-phone", "alice-tablet"], ["bob-phone", "bob-tablet"]])
    }

    @Test("a group that completed does not cut short the next group under its key when its window ends")
    func staleWindowDoesNotSendALaterGroup() async {
        let sent = Mutex<[[String]]>([])
        let gathering = EndpointGathering(window: .seconds(1)) { deliveries in
            sent.withLock { $0.append(deliveries.map(\.target.bindingId).sorted()) }
            return .delivered(providerMessageId: nil, httpStatus: 200)
        }
        let deliveries = Self.job(id: "j", userId: "alice", bindings: ["a", "b"])
        // Complete at once; the window of that group is still running.
        await withTaskGroup(of: Void.self) { group in
            for delivery in deliveries { group.addTask { _ = await gathering.deliver(delivery, expected: 2) } }
        }
        // The same key again (the same deliveries sent twice): the first window ends between its two members.
        try? await Task.sleep(for: .milliseconds(500))
        await withTaskGroup(of: Void.self) { group in
            group.addTask { _ = await gathering.deliver(deliveries[0], expected: 2) }
            try? await Task.sleep(for: .milliseconds(700))
            group.addTask { _ = await gathering.deliver(deliveries[1], expected: 2) }
        }
        #expect(sent.withLock { $0 } == [["a", "b"], ["a", "b"]])
    }
}

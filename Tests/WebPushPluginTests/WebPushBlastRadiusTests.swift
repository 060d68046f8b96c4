import Foundation
import PushCore
import PushCrypto
import PushHTTP
import PushKafka
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushPipeline
import WebPushSandbox
@testable import WebPushPlugin

@Suite("One hostile Web Push subscription stops no other")
struct WebPushBlastRadiusTests {
    /// The sandbox push service, except that subscriptions named `forbidden-…` answer 403
    /// (RFC 8292 §4.2: a VAPID key that does not match the subscription's) and `flood-…` a huge body.
    final class Service: Sendable {
        let tls: SandboxTLS
        let server: SandboxServer
        let sandbox: WebPushSandbox

        init() async throws {
            tls = try SandboxTLS.make()
            let late = Mutex<WebPushSandbox?>(nil)
            server = try await SandboxServer.start(tls: tls) { request in
                if request.path.hasPrefix("/push/forbidden") { return SandboxResponse(status: 403, body: Array("VAPID key mismatch".utf8)) }
                if request.path.hasPrefix("/push/flood") {
                    return SandboxResponse(status: 201, body: [UInt8](repeating: 0x41, count: 4 << 20))
                }
                return late.withLock { $0! }.respond(to: request)
            }
            sandbox = WebPushSandbox(origin: server.baseURL)
            late.withLock { $0 = sandbox }
        }

        /// Its request and lookup timeouts are long: these tests check what a hostile answer does to a send, not how
        /// fast it goes, and the whole suite on two cores has held one such send for over eight seconds.
        func provider() throws -> WebPushProvider {
            try WebPushProvider(
                configuration: WebPushConfiguration(
                    vapidKey: PrivateKey.generateP256(), subject: "mailto:ops@example.com", caFile: tls.caFile,
                    allowedNetworks: [IPNetwork("127.0.0.0/8")!, IPNetwork("::1/128")!], allowedPorts: [server.port],
                    timeout: .seconds(120), dnsTimeout: .seconds(120)),
                transport: TestTransport.make())
        }

        func message(_ index: Int, subscription: WebPushSandbox.Subscription) -> KafkaMessage {
            let json =
                #"{"v":1,"id":"j\#(index)","kind":"message","userId":"u\#(index)","notification":{"body":"hi"},"targets":[{"bindingId":"b\#(index)","provider":"webpush","endpoint":"\#(subscription.endpoint)","keys":{"p256dh":"\#(subscription.p256dh)","auth":"\#(subscription.auth)"}}]}"#
            return KafkaMessage(
                topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: Int64(index), key: nil,
                value: Array(json.utf8), timestamp: currentTimeMilliseconds())
        }

        func stop() async {
            await server.stop()
            tls.remove()
        }
    }

    static func outcome(_ processed: ProcessedJob) -> Outcome? {
        guard case .publish(let publications, _) = processed, case .outcome(let outcome)? = publications.first else { return nil }
        return outcome
    }

    @Test("one subscription answering 403 among 40 leaves the other 39 delivered and no circuit open")
    func oneForbiddenAmongForty() async throws {
        let service = try await Service()
        let provider = try service.provider()
        var configuration = PipelineConfiguration(retryPolicy: RetryPolicy(baseMilliseconds: 1, maximumMilliseconds: 1, maximumAttempts: 1))
        configuration.circuitBreaker = CircuitBreaker.Settings(failureThreshold: 3, coolDownMilliseconds: 60_000)
        let processor = JobProcessor(
            registry: ProviderRegistry([provider]), configuration: configuration, store: InMemoryDeliveryStore(),
            retryQueue: nil, logger: testLogger())
        var outcomes: [Outcome] = []
        for index in 0..<40 {
            let subscription = try service.sandbox.subscribe(id: index == 0 ? "forbidden-0" : "ok-\(index)")
            outcomes.append(try #require(Self.outcome(await processor.process(service.message(index, subscription: subscription)))))
        }
        #expect(outcomes[0].status == .failed)
        #expect(outcomes[0].httpStatus == 403)
        #expect(outcomes.dropFirst().filter { $0.status == .delivered }.count == 39)
        #expect(processor.circuitBreakers.openCircuits.isEmpty)
        #expect(service.sandbox.messages.count == 39)
        await provider.shutdown()
        await service.stop()
    }

    @Test("a push service answering a 4 MiB body is read only up to 4 KiB and the push counts as delivered")
    func floodedAnswerIsCut() async throws {
        let service = try await Service()
        let provider = try service.provider()
        let subscription = try service.sandbox.subscribe(id: "flood-1")
        let target = Target.webPush(
            "w1", endpoint: subscription.endpoint, keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
        let job = Job(
            id: "j", createdAt: currentTimeMilliseconds(), ttl: 60, kind: .message, priority: .normal, userId: "u", targets: [target])
        let result = await provider.deliver(Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds()))
        guard case .delivered(_, 201?, _) = result else {
            Issue.record("expected delivered, got \(result)")
            return
        }
        await provider.shutdown()
        await service.stop()
    }

    @Test("every Web Push origin is its own scope, bounded in flight, and never a metric label")
    func scopePerOrigin() throws {
        let provider = try WebPushProvider(
            configuration: WebPushConfiguration(
                vapidKey: PrivateKey.generateP256(), subject: "mailto:a@b",
                maximumInFlightPerOrigin: 7), transport: TestTransport.make())
        defer { provider.shutdownNow() }
        let first = provider.scope(
            of: Target(
                bindingId: "1", provider: .webpush, details: WebPushTarget(endpoint: "https://updates.push.services.mozilla.com/wpush/v2/a")
            ))
        let second = provider.scope(
            of: Target(
                bindingId: "2", provider: .webpush,
                details: WebPushTarget(endpoint: "https://UPDATES.push.services.mozilla.com:443/wpush/v2/b")))
        let other = provider.scope(
            of: Target(bindingId: "3", provider: .webpush, details: WebPushTarget(endpoint: "https://fcm.googleapis.com/fcm/send/c")))
        #expect(first == second)
        #expect(first != other)
        #expect(first.inFlightLimit == 7)
        #expect(first.metricLabel == "-")
    }
}

private extension WebPushProvider {
    func shutdownNow() { Task { await shutdown() } }
}

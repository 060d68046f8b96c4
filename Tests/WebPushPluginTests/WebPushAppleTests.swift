import Foundation
import PushCore
import PushCrypto
import PushHTTP
import PushKafka
import PushSandbox
import Testing
import TestSupport
import WebPushSandbox
@testable import PushPipeline
@testable import WebPushPlugin

/// Where Apple's push service for Safari is stricter than FCM and Mozilla (issue 40, items 17 and 18).
@Suite("Web Push to Apple: VAPID subjects Apple refuses, pushes Safari would not show")
struct WebPushAppleTests {
    static let refusedSubjects = [
        "mailto:push@localhost", "https://localhost", "https://localhost:8443/contact", "mailto:ops@relay.local",
        "mailto:security@gateway.invalid", "https://push.example.test", "mailto:nobody", "mailto:@example.com",
        "mailto:ops@app.localhost", "ops@example.com",
    ]

    @Test("VAPID subjects Apple refuses are named with the reason; real contacts pass", arguments: refusedSubjects)
    func refusedSubject(_ subject: String) {
        #expect(VAPIDSubject.problem(subject) != nil, "\(subject)")
    }

    @Test("real mailto: and https: contacts are accepted")
    func acceptedSubjects() {
        for subject in ["mailto:ops@example.com", "https://push.example.com", "https://github.com/acme/push", "mailto:Ops@Example.COM"] {
            #expect(VAPIDSubject.problem(subject) == nil, "\(subject)")
        }
    }

    @Test("the Apple sandbox answers 403 BadJwtToken to a subject on localhost, which the generic sandbox accepts")
    func appleSandboxRefusesLocalhostSubject() async throws {
        let tls = try SandboxTLS.make()
        let apple = try await WebPushSandboxInstance.start(tls: tls, apple: true)
        let others = try await WebPushSandboxInstance.start(tls: tls)
        func result(_ instance: WebPushSandboxInstance, subject: String) async throws -> DeliveryResult {
            let provider = try WebPushProvider(
                configuration: WebPushConfiguration(
                    vapidKey: PrivateKey.generateP256(), subject: subject, caFile: tls.caFile,
                    allowedNetworks: WebPushSandboxTests.loopback, allowedPorts: [instance.server.port]), transport: TestTransport.make())
            let subscription = try instance.sandbox.subscribe()
            let target = Target.webPush(
                "w", endpoint: subscription.endpoint, keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
            let job = Job(
                id: "j", createdAt: currentTimeMilliseconds(), ttl: 60, kind: .message, priority: .high, userId: "u",
                notification: PushCore.Notification(title: "T", body: "B"), targets: [target])
            let result = await provider.deliver(Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds()))
            await provider.shutdown()
            return result
        }
        guard case .failed(_, 403?, .checkCredentials, _) = try await result(apple, subject: "mailto:push@localhost") else {
            Issue.record("Apple accepted a localhost subject")
            return
        }
        guard case .delivered = try await result(apple, subject: "mailto:ops@example.com") else {
            Issue.record("Apple refused a real subject")
            return
        }
        guard case .delivered = try await result(others, subject: "mailto:push@localhost") else {
            Issue.record("FCM and Mozilla accept it")
            return
        }
        await apple.server.stop()
        await others.server.stop()
        tls.remove()
    }

    @Test(
        "a cancel or wake-up to Safari's push service ends failed unsent, saying Safari would revoke the permission",
        arguments: [JobKind.cancel, .wake])
    func invisiblePushToSafari(_ kind: JobKind) async throws {
        let transport = RecordingTransport()
        let provider = try WebPushProvider(
            configuration: WebPushConfiguration(vapidKey: PrivateKey.generateP256(), subject: "mailto:ops@example.com"),
            transport: transport)
        let keys = WebPushKeys(
            p256dh: Base64URL.encode(try PrivateKey.generateP256().rawPublicKey()), auth: Base64URL.encode(try RandomBytes.generate(16)))
        let target = Target.webPush("w", endpoint: "https://web.push.apple.com/QGnR4kM3", keys: keys)
        let job = Job(id: "j", createdAt: currentTimeMilliseconds(), ttl: 60, kind: kind, priority: .high, userId: "u", targets: [target])
        let result = await provider.deliver(Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds()))
        guard case .failed(let reason, nil, .none, _) = result else {
            Issue.record("got \(result)")
            return
        }
        #expect(reason.contains("Safari revokes the push permission"))
        #expect(transport.requests == 0)
        #expect(SafariVisibilityRule.isApple(endpoint: "https://WEB.push.apple.com:443/x"))
        #expect(!SafariVisibilityRule.isApple(endpoint: "https://fcm.googleapis.com/fcm/send/x"))
        #expect(!SafariVisibilityRule.isApple(endpoint: "https://push.apple.com.evil.example/x"))
    }

    @Test("a message, a call or a cancel to another push service is not held back by Safari's rule")
    func otherServicesUnaffected() {
        let keys = WebPushKeys(p256dh: "p", auth: "a")
        let mozilla = "https://updates.push.services.mozilla.com/wpush/v2/x"
        for (endpoint, kind, notification) in [
            ("https://web.push.apple.com/x", JobKind.message, Notification(body: "Hi")), ("https://web.push.apple.com/x", .call, nil),
            (mozilla, .cancel, nil), (mozilla, .message, nil), (mozilla, .custom, nil),
        ] {
            let target = Target.webPush("w", endpoint: endpoint, keys: keys)
            let job = Job(
                id: "j", createdAt: 0, ttl: 60, kind: kind, priority: .high, userId: "u", notification: notification, targets: [target])
            #expect(SafariVisibilityRule.refusal(Delivery(job: job, target: target, attempt: 1, now: 0)) == nil, "\(kind) to \(endpoint)")
        }
    }

    @Test(
        "a message or custom push with no title, subtitle or body to Safari's push service ends failed unsent; with text it goes",
        arguments: [JobKind.message, .custom])
    func messageWithNothingToShowToSafari(_ kind: JobKind) async throws {
        let transport = RecordingTransport()
        let provider = try WebPushProvider(
            configuration: WebPushConfiguration(vapidKey: PrivateKey.generateP256(), subject: "mailto:ops@example.com"),
            transport: transport)
        let keys = WebPushKeys(
            p256dh: Base64URL.encode(try PrivateKey.generateP256().rawPublicKey()), auth: Base64URL.encode(try RandomBytes.generate(16)))
        let target = Target.webPush("w", endpoint: "https://web.push.apple.com/QGnR4kM3", keys: keys)
        for notification in [nil, Notification(sound: "ding.caf", badge: 3)] {
            let job = Job(
                id: "j", createdAt: currentTimeMilliseconds(), ttl: 60, kind: kind, priority: .high, userId: "u",
                notification: notification, data: ["chatId": "7"], targets: [target])
            let result = await provider.deliver(Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds()))
            guard case .failed(let reason, nil, .none, _) = result else {
                Issue.record("got \(result)")
                continue
            }
            #expect(reason.hasPrefix("a \(kind.rawValue) without a notification to show shows nothing"))
            #expect(reason.contains("Safari revokes the push permission"))
        }
        #expect(transport.requests == 0)
        for notification in [Notification(title: "Erin"), Notification(body: "Hello"), Notification(locKey: "NEW_MESSAGE")] {
            let job = Job(
                id: "j", createdAt: 0, ttl: 60, kind: kind, priority: .high, userId: "u", notification: notification, targets: [target])
            #expect(SafariVisibilityRule.refusal(Delivery(job: job, target: target, attempt: 1, now: 0)) == nil)
        }
        await provider.shutdown()
    }

    @Test("a target refused before any request has attempts 0 in its outcome; one sent has attempts 1")
    func refusedUnsentSpendsNoAttempt() async throws {
        let tls = try SandboxTLS.make()
        let instance = try await WebPushSandboxInstance.start(tls: tls)
        let provider = try WebPushProvider(
            configuration: WebPushConfiguration(
                vapidKey: PrivateKey.generateP256(), subject: "mailto:ops@example.com", caFile: tls.caFile,
                allowedNetworks: WebPushSandboxTests.loopback, allowedPorts: [instance.server.port]),
            transport: TestTransport.make())
        let subscription = try instance.sandbox.subscribe()
        let keys = #"{"p256dh":"\#(subscription.p256dh)","auth":"\#(subscription.auth)"}"#
        // A message without a notification: Safari's push service would revoke the permission, the sandbox takes it.
        let json =
            #"{"v":1,"id":"j1","kind":"message","userId":"u","data":{"chatId":"7"},"targets":["#
            + #"{"bindingId":"safari","provider":"webpush","endpoint":"https://web.push.apple.com/QGnR4kM3","keys":\#(keys)},"#
            + #"{"bindingId":"broken","provider":"webpush","endpoint":"\#(subscription.endpoint)","keys":{"p256dh":"AAAA","auth":"\#(subscription.auth)"}},"#
            + #"{"bindingId":"sent","provider":"webpush","endpoint":"\#(subscription.endpoint)","keys":\#(keys)}]}"#
        let processor = JobProcessor(
            registry: ProviderRegistry([provider]), configuration: PipelineConfiguration(), store: InMemoryDeliveryStore(),
            retryQueue: nil, logger: testLogger())
        let processed = await processor.process(
            KafkaMessage(
                topicPartition: TopicPartition(topic: "push.jobs", partition: 0), offset: 0, key: nil, value: Array(json.utf8),
                timestamp: currentTimeMilliseconds()))
        guard case .publish(let publications, _) = processed else {
            Issue.record("nothing published: \(processed)")
            return
        }
        var outcomes: [String: Outcome] = [:]
        for case .outcome(let outcome) in publications { outcomes[outcome.bindingId] = outcome }
        #expect(outcomes["safari"]?.status == .failed)
        #expect(outcomes["safari"]?.attempts == 0, "Safari's rule sent nothing")
        #expect(outcomes["broken"]?.status == .rejected)
        #expect(outcomes["broken"]?.attempts == 0, "malformed keys sent nothing")
        #expect(outcomes["sent"]?.status == .delivered)
        #expect(outcomes["sent"]?.attempts == 1)
        #expect(instance.sandbox.messages.count == 1)
        await provider.shutdown()
        await instance.server.stop()
        tls.remove()
    }
}

/// Counts the requests it is asked to send and answers 201.
final class RecordingTransport: HTTPTransport {
    private let count = Locked(0)
    var requests: Int { count.withLock { $0 } }

    func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
        count.withLock { $0 += 1 }
        return HTTPResponse(status: 201, headers: [], body: [])
    }

    func closeConnections(except live: Set<ConnectionIdentity>) {}
    func shutdown() {}
}

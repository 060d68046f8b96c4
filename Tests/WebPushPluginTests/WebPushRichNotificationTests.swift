import Foundation
import PushCore
import PushCrypto
import PushHTTP
import Testing
import TestSupport
import WebPushSandbox
@testable import WebPushPlugin

@Suite("Web Push: notification fields, overrides and alerts that fit, against a push-service sandbox")
struct WebPushRichNotificationTests {
    typealias Harness = WebPushSandboxTests.Harness

    static func delivery(
        _ subscription: WebPushSandbox.Subscription, _ notification: PushCore.Notification,
        overrides: [ProviderID: JSONValue] = [:]
    ) -> Delivery {
        let target = Target.webPush(
            "w1", endpoint: subscription.endpoint, keys: WebPushKeys(p256dh: subscription.p256dh, auth: subscription.auth))
        let job = Job(
            id: "job-w", createdAt: currentTimeMilliseconds(), ttl: 600, kind: .message, priority: .high, userId: "u",
            notification: notification, overrides: overrides, targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds())
    }

    @Test("the summary JSON carries every notification field the job gave, under its contract name")
    func summaryFields() async throws {
        let harness = try await Harness.start()
        let subscription = try harness.instance.sandbox.subscribe()
        let notification = Notification(
            title: "Bob", subtitle: "Team", body: "Hi", sound: .init(name: "a", isCritical: true, volume: 0.5),
            badge: 1, tag: "chat-42", icon: "/icon.png", clickAction: "https://chat.example/c/42",
            locKey: "MSG", locArgs: ["Bob"])
        let result = await harness.provider.deliver(Self.delivery(subscription, notification))
        guard case .delivered(_, 201, false) = result else {
            Issue.record("\(result)")
            return
        }
        let message = try #require(harness.instance.sandbox.messages.first)
        #expect(
            String(decoding: message.plaintext, as: UTF8.self) == #"{"jobId":"job-w","kind":"message","notification":{"title":"Bob","#
                + #""subtitle":"Team","body":"Hi","sound":{"name":"a","critical":true,"volume":0.5},"badge":1,"tag":"chat-42","icon":"/icon.png","#
                + #""clickAction":"https://chat.example/c/42","locKey":"MSG","locArgs":["Bob"]}}"#)
        await harness.stop()
    }

    @Test("overrides.webpush.payload is merged last into the summary JSON")
    func overrideMerged() async throws {
        let harness = try await Harness.start()
        let subscription = try harness.instance.sandbox.subscribe()
        let override: JSONValue = .object([("payload", .object([("actions", .array([.string("reply")])), ("kind", .null)]))])
        _ = await harness.provider.deliver(Self.delivery(subscription, Notification(title: "t"), overrides: ["webpush": override]))
        let message = try #require(harness.instance.sandbox.messages.first)
        #expect(
            String(decoding: message.plaintext, as: UTF8.self) == #"{"jobId":"job-w","notification":{"title":"t"},"actions":["reply"]}"#)
        await harness.stop()
    }

    @Test("a message over 3993 plaintext bytes is shortened and delivered, marked truncated; it decrypts within 4096 bytes")
    func truncated() async throws {
        let harness = try await Harness.start()
        let subscription = try harness.instance.sandbox.subscribe()
        let result = await harness.provider.deliver(
            Self.delivery(subscription, Notification(title: "Bob", body: String(repeating: "ü", count: 3000))))
        guard case .delivered(_, 201, true) = result else {
            Issue.record("\(result)")
            return
        }
        let message = try #require(harness.instance.sandbox.messages.first)
        #expect(message.plaintext.count <= 3993)
        #expect(try JSONParser.parse(message.plaintext)["notification"]?["title"] == .string("Bob"))
        await harness.stop()
    }
}

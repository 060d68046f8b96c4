import Foundation
import PushCore
import Testing
import TestSupport
import HMSSandbox
@testable import HMSPlugin

@Suite("HMS: notification fields in the data message, overrides and alerts that fit, against the Push Kit sandbox")
struct HMSRichNotificationTests {
    static func delivery(_ notification: PushCore.Notification, overrides: [ProviderID: JSONValue] = [:]) -> Delivery {
        let now = currentTimeMilliseconds()
        let target = Target.hms("b", app: HMSSandboxInstance.appId, token: "tok-1")
        let job = Job(
            id: "j", createdAt: now, ttl: 60, kind: .message, priority: .high, userId: "u", notification: notification,
            overrides: overrides, targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: now)
    }

    func data(_ body: JSONValue) throws -> JSONValue {
        guard case .string(let text)? = body["message"]?["data"] else { throw CancellationError() }
        return try JSONParser.parse(Array(text.utf8))
    }

    @Test("the data message's summary carries the notification fields (Huawei data messages have no other place)")
    func fieldsInData() async throws {
        let harness = try await HMSHarness.start()
        let result = await harness.provider.deliver(
            Self.delivery(Notification(title: "Bob", body: "Hi", channelId: "messages", tag: "chat-42")))
        guard case .delivered(_, 200?, false) = result else {
            Issue.record("\(result)")
            return
        }
        let notification = try data(harness.sentBody())["notification"]
        #expect(notification?["channelId"] == .string("messages"))
        #expect(notification?["tag"] == .string("chat-42"))
        await harness.stop()
    }

    @Test("overrides.hms.message is merged last; the token stays the target's")
    func overrideMerged() async throws {
        let harness = try await HMSHarness.start()
        let override: JSONValue = .object([("message", .object([("android", .object([("fast_app_target", .integer(1))]))]))])
        _ = await harness.provider.deliver(Self.delivery(Notification(title: "t"), overrides: ["hms": override]))
        let body = try harness.sentBody()
        #expect(body["message"]?["android"]?["fast_app_target"] == .integer(1))
        #expect(body["message"]?["android"]?["urgency"] == .string("HIGH"))
        #expect(body["message"]?["token"] == .array([.string("tok-1")]))
        await harness.stop()
    }

    @Test("a message over 4096 bytes without its token is shortened and delivered, marked truncated")
    func truncated() async throws {
        let harness = try await HMSHarness.start()
        let result = await harness.provider.deliver(Self.delivery(Notification(title: "Bob", body: String(repeating: "ü", count: 3000))))
        guard case .delivered(_, 200?, true) = result else {
            Issue.record("\(result)")
            return
        }
        let body = try data(harness.sentBody())["notification"]?["body"]
        guard case .string(let text)? = body else {
            Issue.record("no body")
            return
        }
        #expect(text.hasSuffix("…"))
        await harness.stop()
    }
}

import Foundation
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
import FCMSandbox
@testable import FCMPlugin

@Suite("FCM: notification fields, overrides and alerts that fit, against the FCM sandbox")
struct FCMRichNotificationTests {
    static let chat = PushCore.Notification(
        title: "Bob", subtitle: "Team chat", body: "Lunch?", sound: .init(name: "alarm", isCritical: true), badge: 4, threadId: "chat-42",
        category: "MESSAGE_REPLY", interruptionLevel: .timeSensitive, relevanceScore: 0.5, image: "https://example.com/a.png",
        channelId: "messages", tag: "chat-42", color: "#112233", icon: "ic_chat", clickAction: "OPEN_CHAT", locKey: "MSG",
        locArgs: ["Bob"], titleLocKey: "TITLE", titleLocArgs: ["Bob"], mutableContent: true)

    static func delivery(
        _ notification: PushCore.Notification?, token: String = "live-1", platform: String = "android",
        overrides: [ProviderID: JSONValue] = [:], data: [String: String] = [:]
    ) -> Delivery {
        let target = Target.fcm("b", token: token, platform: platform)
        let job = Job(
            id: "j", createdAt: currentTimeMilliseconds(), ttl: 60, kind: .message, priority: .high, userId: "u",
            notification: notification, data: data, overrides: overrides, targets: [target])
        return Delivery(job: job, target: target, attempt: 1, now: currentTimeMilliseconds())
    }

    static func message(_ delivery: Delivery) throws -> JSONValue {
        try #require(try JSONParser.parse(FCMMessage.body(delivery))["message"])
    }

    @Test("Android fields go to android.notification under Firebase's names; the image to message.notification")
    func androidMapping() throws {
        let message = try Self.message(Self.delivery(Self.chat))
        #expect(
            message["notification"]
                == .object([
                    ("title", .string("Bob")), ("body", .string("Lunch?")),
                    ("image", .string("https://example.com/a.png")),
                ]))
        let android = try #require(message["android"]?["notification"])
        #expect(android["channel_id"] == .string("messages"))
        #expect(android["tag"] == .string("chat-42"))
        #expect(android["color"] == .string("#112233"))
        #expect(android["icon"] == .string("ic_chat"))
        #expect(android["click_action"] == .string("OPEN_CHAT"))
        #expect(android["sound"] == .string("alarm"))
        #expect(android["notification_count"] == .integer(4))
        #expect(android["body_loc_key"] == .string("MSG"))
        #expect(android["body_loc_args"] == .array([.string("Bob")]))
        #expect(android["title_loc_key"] == .string("TITLE"))
        #expect(android["title_loc_args"] == .array([.string("Bob")]))
        #expect(message["apns"] == nil)
    }

    @Test("an iOS token gets Apple's keys in the apns block: the whole alert with its subtitle, the critical sound, thread-id, category")
    func iosMapping() throws {
        let aps = try #require(try Self.message(Self.delivery(Self.chat, platform: "ios"))["apns"]?["payload"]?["aps"])
        #expect(aps["alert"]?["subtitle"] == .string("Team chat"))
        #expect(aps["alert"]?["loc-key"] == .string("MSG"))
        #expect(aps["sound"]?["critical"] == .integer(1))
        #expect(aps["thread-id"] == .string("chat-42"))
        #expect(aps["category"] == .string("MESSAGE_REPLY"))
        #expect(aps["interruption-level"] == .string("time-sensitive"))
        #expect(aps["relevance-score"] == .double(0.5))
        #expect(aps["mutable-content"] == .integer(1))
    }

    @Test("a rich message passes the sandbox's AndroidNotification checks and is delivered")
    func richDelivered() async throws {
        let harness = try await FCMHarness.start()
        for platform in ["android", "ios"] {
            let result = await harness.provider.deliver(Self.delivery(Self.chat, platform: platform))
            guard case .delivered(_, 200?, false) = result else {
                Issue.record("\(platform): \(result)")
                continue
            }
        }
        await harness.stop()
    }

    @Test("the sandbox refuses an unknown android.notification name and a color not in #rrggbb, as FCM does")
    func sandboxChecks() async throws {
        let harness = try await FCMHarness.start()
        for android: JSONValue in [
            .object([("chanel_id", .string("x"))]), .object([("color", .string("red"))]),
            .object([("notification_count", .string("4"))]),
        ] {
            let override: JSONValue = .object([("message", .object([("android", .object([("notification", android)]))]))])
            let result = await harness.provider.deliver(Self.delivery(Notification(title: "t"), overrides: ["fcm": override]))
            guard case .failed(_, 400?, _, _) = result else {
                Issue.record("expected INVALID_ARGUMENT for \(android): \(result)")
                continue
            }
        }
        await harness.stop()
    }

    @Test("overrides.fcm.message is merged last; the token stays the target's")
    func overrideMerged() async throws {
        let override: JSONValue = .object([
            (
                "message",
                .object([
                    (
                        "android",
                        .object([("direct_boot_ok", .bool(true)), ("notification", .object([("visibility", .string("PRIVATE"))]))])
                    ),
                    ("fcm_options", .object([("analytics_label", .string("chat"))])),
                ])
            )
        ])
        let message = try Self.message(Self.delivery(Notification(title: "t", channelId: "messages"), overrides: ["fcm": override]))
        #expect(message["token"] == .string("live-1"))
        #expect(message["android"]?["direct_boot_ok"] == .bool(true))
        #expect(message["android"]?["notification"]?["visibility"] == .string("PRIVATE"))
        #expect(message["android"]?["notification"]?["channel_id"] == .string("messages"))
        #expect(message["fcm_options"]?["analytics_label"] == .string("chat"))
        let harness = try await FCMHarness.start()
        let result = await harness.provider.deliver(Self.delivery(Notification(title: "t"), overrides: ["fcm": override]))
        guard case .delivered = result else {
            Issue.record("\(result)")
            return
        }
        await harness.stop()
    }

    @Test("a reserved data key added by an override fails the FCM target, not sent")
    func reservedKeyInOverride() async throws {
        let harness = try await FCMHarness.start()
        let override: JSONValue = .object([("message", .object([("data", .object([("from", .string("x"))]))]))])
        let result = await harness.provider.deliver(Self.delivery(Notification(title: "t"), overrides: ["fcm": override]))
        guard case .failed(let reason, nil, _, _) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(reason.hasSuffix("(overrides.fcm)"))
        await harness.stop()
    }

    @Test("a message over 4096 bytes is shortened on a UTF-8 boundary and delivered, marked truncated")
    func truncated() async throws {
        let harness = try await FCMHarness.start()
        let result = await harness.provider.deliver(Self.delivery(Notification(title: "Bob", body: String(repeating: "日本", count: 1000))))
        guard case .delivered(_, 200?, true) = result else {
            Issue.record("expected truncated delivery: \(result)")
            return
        }
        let request = try #require(harness.instance.server.requests.last { $0.path.hasSuffix("messages:send") })
        let body = try #require(try JSONParser.parse(request.body)["message"]?["notification"]?["body"])
        guard case .string(let text) = body else {
            Issue.record("no body")
            return
        }
        #expect(text.hasSuffix("…"))
        #expect(
            FCMMessageRulesMirror.payloadBytes(try #require(try JSONParser.parse(request.body)["message"])) <= 4096,
            "data and notification fit Firebase's 4096 bytes")
        await harness.stop()
    }

    @Test("a message too large even with an empty body fails before any request")
    func cannotFit() async throws {
        let harness = try await FCMHarness.start()
        let result = await harness.provider.deliver(
            Self.delivery(Notification(body: "b"), data: ["blob": String(repeating: "x", count: 5000)]))
        guard case .failed(let reason, nil, _, _) = result else {
            Issue.record("\(result)")
            return
        }
        #expect(reason.hasSuffix("not sent"))
        #expect(!harness.instance.server.requests.contains { $0.path.hasSuffix("messages:send") })
        await harness.stop()
    }
}

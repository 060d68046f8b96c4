import Foundation
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
@testable import FCMPlugin

@Suite("FCM v1 message mapping")
struct FCMMessageTests {
    static func body(
        kind: JobKind = .message, priority: JobPriority = .high, ttl: Int64 = 45, platform: String? = nil,
        collapseKey: String? = nil
    ) throws -> JSONValue {
        let target = Target.fcm("b", app: "example-project", token: "tok-1", platform: platform)
        let job = Job(
            id: "j", createdAt: 1_795_310_000_000, ttl: ttl, kind: kind, priority: priority, userId: "u",
            collapseKey: collapseKey, notification: Notification(title: "Bob", body: "Hi", sound: "ring", badge: 2),
            data: ["callId": "c-1", "caller": "bob"], targets: [target])
        return try JSONParser.parse(FCMMessage.body(Delivery(job: job, target: target, attempt: 1, now: 1_795_310_000_000)))
    }

    @Test("token, string data, android priority, ttl in seconds from the remaining TTL, collapse_key, sound and notification_count")
    func androidMapping() throws {
        let message = try #require(try Self.body(priority: .normal, collapseKey: "chat-42")["message"])
        #expect(message["token"] == .string("tok-1"))
        #expect(message["data"] == .object([("callId", .string("c-1")), ("caller", .string("bob"))]))
        #expect(message["notification"] == .object([("title", .string("Bob")), ("body", .string("Hi"))]))
        #expect(
            message["android"]
                == .object([
                    ("priority", .string("normal")), ("ttl", .string("45s")), ("collapse_key", .string("chat-42")),
                    ("notification", .object([("sound", .string("ring")), ("notification_count", .integer(2))])),
                ]))
        #expect(message["apns"] == nil)
        #expect(message["webpush"] == nil)
    }

    @Test("calls, cancels and wake-ups are data-only, so the app's own code runs", arguments: [JobKind.call, .cancel, .wake])
    func dataOnly(_ kind: JobKind) throws {
        let message = try #require(try Self.body(kind: kind)["message"])
        #expect(message["notification"] == nil)
        #expect(message["data"] != nil)
    }

    @Test("an iOS token gets an apns block; a data-only push to iOS is a background push with apns-priority 5")
    func iosBlock() throws {
        let wake = try #require(try Self.body(kind: .wake, platform: "ios")["message"]?["apns"])
        #expect(
            wake["headers"]
                == .object([
                    ("apns-priority", .string("5")), ("apns-push-type", .string("background")),
                    ("apns-expiration", .string("1795310045")),
                ]))
        #expect(wake["payload"] == .object([("aps", .object([("content-available", .integer(1))]))]))
        let message = try #require(try Self.body(kind: .message, platform: "ios")["message"]?["apns"])
        #expect(message["headers"]?["apns-priority"] == .string("10"))
        #expect(message["headers"]?["apns-push-type"] == .string("alert"))
    }

    @Test("a web token gets a webpush block with TTL and Urgency")
    func webBlock() throws {
        let webpush = try #require(try Self.body(priority: .high, platform: "web")["message"]?["webpush"])
        #expect(webpush["headers"] == .object([("TTL", .string("45")), ("Urgency", .string("high"))]))
    }

    @Test("ttl 0 is sent as 0s (now or never)")
    func zeroTTL() throws {
        #expect(try Self.body(ttl: 0)["message"]?["android"]?["ttl"] == .string("0s"))
    }
}

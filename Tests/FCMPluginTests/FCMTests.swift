import Foundation
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
@testable import FCMPlugin

@Suite("FCM v1 message mapping")
struct FCMMessageTests {
    static func body(kind: JobKind = .message, priority: JobPriority = .high, ttl: Int64 = 45, platform: String? = nil,
                     collapseKey: String? = nil) throws -> JSONValue {
        let target = Target(bindingId: "b", provider: .fcm, app: "example-project", token: "tok-1", platform: platform)
        let job = Job(id: "j", createdAt: 1_795_310_000_000, ttl: ttl, kind: kind, priority: priority, userId: "u",
                      collapseKey: collapseKey, notification: Notification(title: "Bob", body: "Hi", sound: "ring", badge: 2),
                      data: ["callId": "c-1", "caller": "bob"], targets: [target])
        return try JSONParser.parse(FCMMessage.body(Delivery(job: job, target: target, attempt: 1, now: 1_795_310_000_000)))
    }

    @Test("token, string data, android priority, ttl as \"<seconds>s\" from the remaining TTL, collapse_key")
    func androidMapping() throws {
        let message = try #require(try Self.body(priority: .normal, collapseKey: "chat-42")["message"])
        #expect(message["token"] == .string("tok-1"))
        #expect(message["data"] == .object([("caller", .string("bob")), ("callId", .string("c-1"))]))
        #expect(message["notification"] == .object([("title", .string("Bob")), ("body", .string("Hi"))]))
        #expect(message["android"] == .object([("priority", .string("normal")), ("ttl", .string("45s")), ("collapse_key", .string("chat-42")),
                                               ("notification", .object([("sound", .string("ring")), ("notification_count", .integer(2))]))]))
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
        let call = try #require(try Self.body(kind: .call, platform: "ios")["message"]?["apns"])
        #expect(call["headers"] == .object([("apns-priority", .string("5")), ("apns-push-type", .string("background")),
                                            ("apns-expiration", .string("1795310045"))]))
        #expect(call["payload"] == .object([("aps", .object([("content-available", .integer(1))]))]))
        let message = try #require(try Self.body(kind: .message, platform: "ios")["message"]?["apns"])
        #expect(message["headers"]?["apns-priority"] == .string("10"))
        #expect(message["headers"]?["apns-push-type"] == .string("alert"))
    }

    @Test("a web token gets a webpush block with TTL and Urgency")
    func webBlock() throws {
        let webpush = try #require(try Self.body(priority: .high, platform: "web")["message"]?["webpush"])
        #expect(webpush["headers"] == .object([("TTL", .string("45")), ("Urgency", .string("high"))]))
    }

    @Test("ttl 0 is sent as \"0s\" (now or never)")
    func zeroTTL() throws {
        #expect(try Self.body(ttl: 0)["message"]?["android"]?["ttl"] == .string("0s"))
    }
}

@Suite("FCM v1 error table (FcmError detail, not error.status)")
struct FCMResponseTests {
    static func error(_ status: Int, _ grpc: String, _ code: String?, message: String = "m", tokenViolation: Bool = false,
                      retryAfter: String? = nil) -> HTTPResponse {
        var details: [String] = []
        if let code { details.append(#"{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(code)"}"#) }
        if tokenViolation {
            details.append(#"{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"message.token","description":"x"}]}"#)
        }
        let body = #"{"error":{"code":\#(status),"message":"\#(message)","status":"\#(grpc)","details":[\#(details.joined(separator: ","))]}}"#
        return HTTPResponse(status: status, headers: retryAfter.map { [("retry-after", $0)] } ?? [], body: Array(body.utf8))
    }

    @Test("200 is delivered with the message name")
    func delivered() {
        let response = HTTPResponse(status: 200, headers: [], body: Array(#"{"name":"projects/p/messages/0:1"}"#.utf8))
        #expect(FCMResponse.classify(response) == .delivered(providerMessageId: "projects/p/messages/0:1", httpStatus: 200))
    }

    @Test("UNREGISTERED removes the binding; SENDER_ID_MISMATCH is a routing problem: check_credentials, nothing removed")
    func deadTokens() {
        #expect(FCMResponse.classify(Self.error(404, "NOT_FOUND", "UNREGISTERED")) == .rejected(reason: "UNREGISTERED: m", httpStatus: 404))
        #expect(FCMResponse.classify(Self.error(403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"))
            == .failed(reason: "SENDER_ID_MISMATCH: m", httpStatus: 403, action: .checkCredentials, blame: .request))
    }

    @Test("INVALID_ARGUMENT removes the binding only when it is about the registration token")
    func invalidArgument() {
        #expect(FCMResponse.classify(Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", tokenViolation: true))
            == .rejected(reason: "INVALID_ARGUMENT: m", httpStatus: 400))
        #expect(FCMResponse.classify(Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "The registration token is not a valid FCM registration token"))
            == .rejected(reason: "INVALID_ARGUMENT: The registration token is not a valid FCM registration token", httpStatus: 400))
        #expect(FCMResponse.classify(Self.error(400, "INVALID_ARGUMENT", "INVALID_ARGUMENT", message: "Invalid value at 'message.android.ttl'"))
            == .failed(reason: "INVALID_ARGUMENT: Invalid value at 'message.android.ttl'", httpStatus: 400))
    }

    @Test("QUOTA_EXCEEDED (429, RESOURCE_EXHAUSTED in status) is retried after Retry-After, 60 s when absent")
    func quota() {
        #expect(FCMResponse.classify(Self.error(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED", retryAfter: "7"))
            == .retryable(reason: "QUOTA_EXCEEDED: m", httpStatus: 429, retryAfter: .seconds(7)))
        #expect(FCMResponse.classify(Self.error(429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"))
            == .retryable(reason: "QUOTA_EXCEEDED: m", httpStatus: 429, retryAfter: .seconds(60)))
    }

    @Test("UNAVAILABLE and INTERNAL are retried; THIRD_PARTY_AUTH_ERROR and UNAUTHENTICATED blame credentials")
    func others() {
        #expect(FCMResponse.classify(Self.error(503, "UNAVAILABLE", "UNAVAILABLE", retryAfter: "3"))
            == .retryable(reason: "UNAVAILABLE: m", httpStatus: 503, retryAfter: .seconds(3)))
        #expect(FCMResponse.classify(Self.error(500, "INTERNAL", "INTERNAL")) == .retryable(reason: "INTERNAL: m", httpStatus: 500))
        #expect(FCMResponse.classify(Self.error(401, "UNAUTHENTICATED", "THIRD_PARTY_AUTH_ERROR"))
            == .failed(reason: "THIRD_PARTY_AUTH_ERROR: m", httpStatus: 401, action: .checkCredentials, blame: .part))
        #expect(FCMResponse.classify(Self.error(401, "UNAUTHENTICATED", nil))
            == .failed(reason: "UNAUTHENTICATED: m", httpStatus: 401, action: .checkCredentials))
    }
}

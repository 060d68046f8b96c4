import Foundation
import PushCore
import PushHTTP
import PushSandbox
import Testing
import TestSupport
@testable import APNsPlugin

/// docs/providers/apns.md, run: each answer row is classified and must give the row's outcome,
/// action, retry and circuit; each request row must name tests that exist.
@Suite("APNs conformance (docs/providers/apns.md)")
struct APNsConformanceTests {
    static func answer(_ status: Int, _ reason: String? = nil, _ extra: String = "", headers: [(name: String, value: String)] = [])
        -> HTTPResponse
    {
        HTTPResponse(status: status, headers: headers, body: Array((reason.map { #"{"reason":"\#($0)"\#(extra)}"# } ?? "").utf8))
    }

    /// The answer each row describes.
    static let answers: [String: HTTPResponse] = [
        "APNS-A01": answer(200, headers: [("apns-id", "11111111-2222-5333-8444-555555555555")]),
        "APNS-A02": answer(410, "Unregistered", #","timestamp":1795000000000"#),
        "APNS-A03": answer(410, "ExpiredToken"),
        "APNS-A04": answer(400, "BadDeviceToken"),
        "APNS-A05": answer(400, "DeviceTokenNotForTopic"),
        "APNS-A06": answer(400, "MissingTopic"),
        "APNS-A07": answer(400, "TopicDisallowed"),
        "APNS-A08": answer(400, "BadTopic"),
        "APNS-A09": answer(400, "IdleTimeout"),
        "APNS-A10": answer(400, "BadCollapseId"),
        "APNS-A11": answer(400, "BadExpirationDate"),
        "APNS-A12": answer(400, "BadMessageId"),
        "APNS-A13": answer(400, "BadPriority"),
        "APNS-A14": answer(400, "DuplicateHeaders"),
        "APNS-A15": answer(400, "InvalidPushType"),
        "APNS-A16": answer(400, "MissingDeviceToken"),
        "APNS-A17": answer(400, "PayloadEmpty"),
        "APNS-A18": answer(403, "ExpiredProviderToken"),
        "APNS-A19": answer(403, "BadCertificate"),
        "APNS-A20": answer(403, "BadCertificateEnvironment"),
        "APNS-A21": answer(403, "BadEnvironmentKeyInToken"),
        "APNS-A22": answer(403, "Forbidden"),
        "APNS-A23": answer(403, "InvalidProviderToken"),
        "APNS-A24": answer(403, "MissingProviderToken"),
        "APNS-A25": answer(403, "UnrelatedKeyIdInToken"),
        "APNS-A26": answer(403, "SomeReasonAppleAddsLater"),
        "APNS-A27": answer(404, "BadPath"),
        "APNS-A28": answer(405, "MethodNotAllowed"),
        "APNS-A29": answer(413, "PayloadTooLarge"),
        "APNS-A30": answer(429, "TooManyProviderTokenUpdates"),
        "APNS-A31": answer(429, "TooManyRequests", headers: [("retry-after", "4")]),
        "APNS-A32": answer(500, "InternalServerError"),
        "APNS-A33": answer(503, "ServiceUnavailable"),
        "APNS-A34": answer(503, "Shutdown"),
        "APNS-A35": answer(400, "BadDeviceToken"),
    ]
    /// Rows whose binding named no environment (the app's default was used).
    static let environmentGuessed: Set<String> = ["APNS-A35"]

    @Test(
        "every answer row gives the outcome, action, retry and circuit the table says",
        arguments: ConformanceTable.answerRows("apns", prefix: "APNS"))
    func answerRow(_ row: ConformanceTable.Row) throws {
        let response = try #require(Self.answers[row.id], "\(row.id) has no answer in this test")
        let result = APNsResponse.classify(response, environmentNamed: !Self.environmentGuessed.contains(row.id))
        #expect(ConformanceTable.cells(of: result, scopeName: "(app, environment)") == Array(row.cells[1...4]), "\(row.id): \(result)")
    }

    @Test("every answer of the table is tested and every tested answer is in the table")
    func answerRowsAreComplete() throws {
        try ConformanceTable.expectAnswerRowsComplete("apns", prefix: "APNS", tested: Set(Self.answers.keys))
    }

    @Test("every request rule names tests that exist")
    func requestRowsNameTheirTests() throws {
        try ConformanceTable.expectRequestRowsNameTheirTests("apns", prefix: "APNS", testTarget: "APNsPluginTests", atLeast: 14)
    }

    @Test("410 Unregistered carries invalidSince from Apple's millisecond timestamp")
    func unregisteredSince() {
        #expect(
            APNsResponse.classify(Self.answer(410, "Unregistered", #","timestamp":1795000000000"#))
                == .rejected(reason: "Unregistered", httpStatus: 410, invalidSince: 1_795_000_000_000))
    }

    @Test("a data-only message is a background push: priority 5, content-available 1, no alert")
    func dataOnlyMessage() throws {
        for notification in [nil, Notification()] {
            let built = try APNsRequest.build(
                APNsRulesTests.delivery(kind: .message, priority: .high, notification: notification),
                app: APNsRulesTests.app)
            let headers = Dictionary(built.headers.map { ($0.name, $0.value) }) { first, _ in first }
            #expect(headers["apns-push-type"] == "background")
            #expect(headers["apns-priority"] == "5")
            #expect(headers["apns-topic"] == "com.example.chat")
            #expect(String(decoding: built.payload, as: UTF8.self) == #"{"aps":{"content-available":1},"callId":"c-77"}"#)
        }
        let badgeOnly = try APNsRequest.build(
            APNsRulesTests.delivery(kind: .message, notification: Notification(badge: 2)), app: APNsRulesTests.app)
        #expect(badgeOnly.pushType == .alert, "a badge is something to show")
    }

    @Test("a data-only call stays a VoIP push at priority 10")
    func dataOnlyCall() throws {
        let built = try APNsRequest.build(APNsRulesTests.delivery(kind: .call, notification: nil), app: APNsRulesTests.app)
        let headers = Dictionary(built.headers.map { ($0.name, $0.value) }) { first, _ in first }
        #expect(headers["apns-push-type"] == "voip")
        #expect(headers["apns-priority"] == "10")
        #expect(headers["apns-topic"] == "com.example.chat.voip")
    }

    @Test("the sandbox answers 400 DeviceTokenNotForTopic for a token registered under another app; the binding stays")
    func sandboxTokenOfAnotherApp() async throws {
        let fixture = try await APNsSandboxFixture.start()
        let provider = try APNsSandboxTests().provider(fixture)
        let token = String(repeating: "ab", count: 32)
        fixture.sandbox.register(token: token, bundleId: "com.example.other")
        let delivery = APNsSandboxTests.delivery(token: token, kind: .message)
        let result = await provider.deliver(delivery)
        #expect(result == .failed(reason: "DeviceTokenNotForTopic", httpStatus: 400, action: .checkCredentials, blame: .request))
        #expect(Outcome(job: delivery.job, target: delivery.target, result: result, attempts: 1, at: 0).status == .failed)
        fixture.sandbox.register(token: token, bundleId: APNsSandboxFixture.bundleId)
        guard case .delivered = await provider.deliver(delivery) else {
            Issue.record("the app's own token should deliver")
            return
        }
        await provider.shutdown()
        await fixture.stop()
    }
}

import PushCore
import PushCrypto
import PushHTTP
import Testing
import TestSupport
@testable import WebPushPlugin

/// docs/providers/webpush.md, run: each answer row is classified and must give the row's outcome,
/// action, retry and circuit; each request row must name tests that exist.
@Suite("Web Push conformance (docs/providers/webpush.md)")
struct WebPushConformanceTests {
    static func answer(_ status: Int, retryAfter: String? = nil) -> HTTPResponse {
        HTTPResponse(status: status, headers: retryAfter.map { [("retry-after", $0)] } ?? [], body: [])
    }

    /// The answer each row describes.
    static let answers: [String: HTTPResponse] = [
        "WEBPUSH-A01": HTTPResponse(status: 201, headers: [("location", "https://push.example.net/m/1")], body: []),
        "WEBPUSH-A02": answer(200),
        "WEBPUSH-A03": answer(202),
        "WEBPUSH-A04": answer(404),
        "WEBPUSH-A05": answer(410),
        "WEBPUSH-A06": answer(400),
        "WEBPUSH-A07": answer(401),
        "WEBPUSH-A08": answer(403),
        "WEBPUSH-A09": answer(413),
        "WEBPUSH-A10": answer(429, retryAfter: "5"),
        "WEBPUSH-A11": answer(500),
        "WEBPUSH-A12": answer(503, retryAfter: "2"),
    ]

    @Test(
        "every answer row gives the outcome, action, retry and circuit the table says",
        arguments: ConformanceTable.answerRows("webpush", prefix: "WEBPUSH"))
    func answerRow(_ row: ConformanceTable.Row) throws {
        let response = try #require(Self.answers[row.id], "\(row.id) has no answer in this test")
        let result = WebPushProvider.classify(response)
        #expect(
            ConformanceTable.cells(of: result, scopeName: "(origin)")
                == Array(row.cells[1...4]), "\(row.id): \(result)")
    }

    @Test("every answer of the table is tested and every tested answer is in the table")
    func answerRowsAreComplete() throws {
        try ConformanceTable.expectAnswerRowsComplete("webpush", prefix: "WEBPUSH", tested: Set(Self.answers.keys))
    }

    @Test("every request rule names tests that exist")
    func requestRowsNameTheirTests() throws {
        try ConformanceTable.expectRequestRowsNameTheirTests("webpush", prefix: "WEBPUSH", testTarget: "WebPushPluginTests", atLeast: 8)
    }

    @Test("an endpoint with an explicit :443 gets the VAPID aud without the port")
    func vapidAudienceWithoutDefaultPort() async throws {
        guard case .success(let target) = await EndpointPolicy(EndpointPolicy.Rules()).check("https://198.41.0.4:443/wpush/v2/abc") else {
            Issue.record("refused")
            return
        }
        let tokens = try VAPIDTokens(
            key: PrivateKey.generateP256(), subject: "mailto:ops@example.com", lifetime: .seconds(3600), clock: currentTimeMilliseconds)
        let header = try tokens.authorization(for: target.origin)
        let jwt = try #require(JSONWebToken.parse(String(header.dropFirst("vapid t=".count).prefix { $0 != "," })))
        #expect(jwt.claims["aud"] == .string("https://198.41.0.4"))
    }
}

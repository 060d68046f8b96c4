import PushCore
import PushHTTP
import Testing
import TestSupport
@testable import ProxyPlugin

/// docs/providers/proxy.md, run: each answer row is classified and must give the row's outcome,
/// action, retry and circuit; each request row must name tests that exist.
@Suite("Push-proxy conformance (docs/providers/proxy.md)")
struct ProxyConformanceTests {
    static func answer(_ status: Int, retryAfter: String? = nil) -> HTTPResponse {
        HTTPResponse(status: status, headers: retryAfter.map { [("retry-after", $0)] } ?? [], body: [])
    }

    /// The answer each row describes.
    static let answers: [String: HTTPResponse] = [
        "PROXY-A01": answer(200),
        "PROXY-A02": answer(400),
        "PROXY-A03": answer(403),
        "PROXY-A04": answer(404),
        "PROXY-A05": answer(500),
        "PROXY-A06": answer(503, retryAfter: "3"),
        "PROXY-A07": answer(503),
        "PROXY-A08": answer(502),
        "PROXY-A09": answer(429, retryAfter: "2"),
    ]

    @Test(
        "every answer row gives the outcome, action, retry and circuit the table says",
        arguments: ConformanceTable.answerRows("proxy", prefix: "PROXY"))
    func answerRow(_ row: ConformanceTable.Row) throws {
        let response = try #require(Self.answers[row.id], "\(row.id) has no answer in this test")
        let result = ProxyProvider.classify(response)
        #expect(ConformanceTable.cells(of: result, scopeName: "(app)") == Array(row.cells[1...4]), "\(row.id): \(result)")
    }

    @Test("every answer of the table is tested and every tested answer is in the table")
    func answerRowsAreComplete() throws {
        try ConformanceTable.expectAnswerRowsComplete("proxy", prefix: "PROXY", tested: Set(Self.answers.keys))
    }

    @Test("every request rule names tests that exist")
    func requestRowsNameTheirTests() throws {
        try ConformanceTable.expectRequestRowsNameTheirTests("proxy", prefix: "PROXY", testTarget: "ProxyPluginTests", atLeast: 5)
    }
}

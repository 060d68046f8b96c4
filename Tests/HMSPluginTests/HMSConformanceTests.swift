import PushCore
import PushHTTP
import Testing
import TestSupport
@testable import HMSPlugin

/// docs/providers/hms.md, run: each answer row is classified and must give the row's outcome, action, retry
/// and circuit; each request row must name tests that exist.
@Suite("HMS conformance (docs/providers/hms.md)")
struct HMSConformanceTests {
    static let token = "IQAAAACy0kYkAAAlC7hWr3-token"

    static func answer(_ status: Int, _ code: String?, msg: String = "m", retryAfter: String? = nil) -> HTTPResponse {
        let body = code.map { #"{"code":"\#($0)","msg":"\#(msg)","requestId":"1579999"}"# } ?? ""
        return HTTPResponse(status: status, headers: retryAfter.map { [("retry-after", $0)] } ?? [], body: Array(body.utf8))
    }

    static let answers: [String: HTTPResponse] = [
        "HMS-A01": answer(200, "80000000", msg: "Success"),
        "HMS-A02": answer(200, "80100000", msg: #"{\"success\":0,\"failure\":1,\"illegal_tokens\":[\"\#(token)\"]}"#),
        "HMS-A03": answer(200, "80100000", msg: #"{\"failure\":1,\"illegalTokens\":{\"noRight\":[\"\#(token)\"]}}"#),
        "HMS-A04": answer(200, "80100000", msg: #"{\"success\":1,\"failure\":1,\"illegal_tokens\":[\"another\"]}"#),
        "HMS-A05": answer(400, "80300007", msg: "All the tokens are invalid"),
        "HMS-A06": answer(401, "80200003", msg: "Oauth Token expired."),
        "HMS-A07": answer(401, "80200001", msg: "Oauth authentication error"),
        "HMS-A08": HTTPResponse(status: 401, headers: [], body: Array("Unauthorized".utf8)),
        "HMS-A09": answer(400, "80300002"),
        "HMS-A10": answer(400, "80600003"),
        "HMS-A11": answer(400, "80100001", msg: "UnSupported svc"),
        "HMS-A12": answer(400, "80100003"),
        "HMS-A13": answer(400, "80100004"),
        "HMS-A14": answer(400, "80300008"),
        "HMS-A15": answer(400, "80300010"),
        "HMS-A16": HTTPResponse(status: 503, headers: [("retry-after", "1")], body: Array("flow control".utf8)),
        "HMS-A17": HTTPResponse(status: 503, headers: [], body: []),
        "HMS-A18": answer(500, "81000001", msg: "System inner error"),
        "HMS-A19": HTTPResponse(status: 502, headers: [], body: Array("<html>Bad Gateway</html>".utf8)),
        "HMS-A20": HTTPResponse(status: 429, headers: [], body: []),
        "HMS-A21": answer(400, "80100016"),
        "HMS-A22": HTTPResponse(status: 200, headers: [], body: Array("{}".utf8)),
        "HMS-A23": answer(400, "80300007", msg: "All the tokens are invalid"),
    ]

    /// Rows whose target named no app (the default app sent the push); every other row's target named its app.
    static let defaultAppRows: Set<String> = ["HMS-A23"]

    @Test(
        "every answer row gives the outcome, action, retry and circuit the table says",
        arguments: ConformanceTable.answerRows("hms", prefix: "HMS"))
    func answerRow(_ row: ConformanceTable.Row) throws {
        let response = try #require(Self.answers[row.id], "\(row.id) has no answer in this test")
        let result = HMSResponse.classify(HMSAnswer(response), token: Self.token, targetNamesApp: !Self.defaultAppRows.contains(row.id))
        #expect(ConformanceTable.cells(of: result, scopeName: "(app)") == Array(row.cells[1...4]), "\(row.id): \(result)")
    }

    @Test("the access-token answers, and only they, take the renewal path")
    func renewalAnswers() {
        let renewing = Self.answers.filter { HMSAnswer($0.value).refusesAccessToken }.keys.sorted()
        #expect(renewing == ["HMS-A06", "HMS-A07", "HMS-A08"])
    }

    @Test("every answer of the table is tested and every tested answer is in the table")
    func answerRowsAreComplete() throws {
        try ConformanceTable.expectAnswerRowsComplete("hms", prefix: "HMS", tested: Set(Self.answers.keys))
    }

    @Test("every request rule names tests that exist")
    func requestRowsNameTheirTests() throws {
        try ConformanceTable.expectRequestRowsNameTheirTests("hms", prefix: "HMS", testTarget: "HMSPluginTests", atLeast: 14)
    }
}

import Testing
@testable import PushCore

@Suite("Alerts that fit and overrides merged last (PushCore helpers)")
struct AlertFittingTests {
    /// A payload that is the notification's title and body, as a plugin would write them.
    static func payload(_ notification: Notification?) -> [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        if let title = notification?.title { writer.member("title", title) }
        if let body = notification?.body { writer.member("body", body) }
        writer.endObject()
        return writer.bytes
    }

    @Test("a payload within the limit is left alone and not marked truncated")
    func fits() throws {
        let fitted = try #require(AlertFitting.fit(Notification(title: "T", body: "B"), limit: 100, build: Self.payload))
        #expect(fitted.truncated == false)
        #expect(fitted.payload == Self.payload(Notification(title: "T", body: "B")))
    }

    @Test("the body is shortened first, on a UTF-8 boundary, ending with an ellipsis, to exactly fit or less")
    func bodyFirst() throws {
        let body = String(repeating: "ü", count: 100) // 2 bytes each
        let fitted = try #require(AlertFitting.fit(Notification(title: "Title", body: body), limit: 120, build: Self.payload))
        #expect(fitted.truncated)
        #expect(fitted.payload.count <= 120)
        let shortened = try #require(fitted.notification?.body)
        #expect(shortened.hasSuffix("…"))
        #expect(shortened.dropLast().allSatisfy { $0 == "ü" })
        #expect(fitted.notification?.title == "Title")
    }

    @Test("the title is shortened only once the body is empty")
    func titleSecond() throws {
        let fitted = try #require(AlertFitting.fit(Notification(title: String(repeating: "€", count: 50), body: "body text"), limit: 60,
                                                   build: Self.payload))
        #expect(fitted.notification?.body == "")
        #expect(fitted.notification?.title?.hasSuffix("…") == true)
        #expect(fitted.payload.count <= 60)
    }

    @Test("a payload too large even with an empty body and title does not fit")
    func cannotFit() {
        #expect(AlertFitting.fit(Notification(title: "T", body: "B"), limit: 10, build: { _ in Array(repeating: 0x20, count: 11) }) == nil)
        #expect(AlertFitting.fit(nil, limit: 10, build: { _ in Array(repeating: 0x20, count: 11) }) == nil)
    }

    @Test("JSON escaping counts: quotes and control characters are cut until the escaped payload fits")
    func escaping() throws {
        let body = String(repeating: "\"\u{01}", count: 200)
        let fitted = try #require(AlertFitting.fit(Notification(body: body), limit: 200, build: Self.payload))
        #expect(fitted.payload.count <= 200)
    }

    @Test("utf8Prefix never splits a character")
    func utf8Prefix() {
        #expect("a€b".utf8Prefix(2) == "a")
        #expect("a€b".utf8Prefix(4) == "a€")
        #expect("😀".utf8Prefix(3) == "")
        #expect("abc".utf8Prefix(10) == "abc")
        #expect("abc".utf8Prefix(0) == "")
    }

    @Test("merging follows RFC 7396: objects merge deeply, null removes, other values replace")
    func mergePatch() throws {
        let base = try JSONParser.parse(Array(#"{"aps":{"alert":{"title":"a","body":"b"},"badge":1},"k":"v"}"#.utf8))
        let patch = try JSONParser.parse(Array(#"{"aps":{"alert":{"body":"c"},"badge":null,"sound":"s"},"k":["x"]}"#.utf8))
        var writer = JSONWriter()
        writer.value(base.merging(patch))
        #expect(writer.string == #"{"aps":{"alert":{"title":"a","body":"c"},"sound":"s"},"k":["x"]}"#)
        #expect(PayloadOverride.apply(nil, to: Array("{}".utf8)) == Array("{}".utf8))
    }

    @Test("the outcome carries truncated only when true, so old outcomes keep their bytes")
    func outcomeTruncated() throws {
        var outcome = Outcome(jobId: "j", userId: "u", bindingId: "b", provider: "apns", app: nil, status: .delivered, attempts: 1, at: 5)
        #expect(!String(decoding: outcome.encoded(), as: UTF8.self).contains("truncated"))
        outcome.truncated = true
        #expect(String(decoding: outcome.encoded(), as: UTF8.self).hasSuffix(#","at":5,"truncated":true}"#))
        #expect(Outcome(json: outcome.encoded())?.truncated == true)
    }

    @Test("a delivered result marked truncated becomes an outcome with truncated; other results stay unmarked")
    func resultMapping() {
        let target = Target(bindingId: "b", provider: "apns")
        let job = Job(id: "j", createdAt: 0, ttl: 10, kind: .message, priority: .high, userId: "u", targets: [target])
        let delivered = DeliveryResult.delivered(providerMessageId: "m", httpStatus: 200).truncated(true)
        #expect(Outcome(job: job, target: target, result: delivered, attempts: 1, at: 0).truncated)
        #expect(DeliveryResult.retryable(reason: "r", httpStatus: 503).truncated(true) == .retryable(reason: "r", httpStatus: 503))
    }
}

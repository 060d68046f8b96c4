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
        let body = String(repeating: "ü", count: 100)  // 2 bytes each
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
        let fitted = try #require(
            AlertFitting.fit(
                Notification(title: String(repeating: "€", count: 50), body: "body text"), limit: 60,
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

    @Test(
        "a 9 000-member override merged into a 9 000-member document: null removes, values replace in place, new members are appended in the patch's order"
    )
    func largeMergePatch() {
        let count = 9_000
        let document = JSONValue.object((0..<count).map { ("k\($0)", .integer(Int64($0))) })
        let patch = JSONValue.object(
            (0..<count).map { index -> (key: String, value: JSONValue) in
                switch index % 3 {
                case 0: ("k\(index)", .null)
                case 1: ("k\(index)", .object([("replaced", .bool(true)), ("dropped", .null)]))
                default: ("n\(index)", .integer(Int64(index)))
                }
            })
        let expected = JSONValue.object(
            (0..<count).compactMap { index -> (key: String, value: JSONValue)? in
                switch index % 3 {
                case 0: nil
                case 1: ("k\(index)", .object([("replaced", .bool(true))]))
                default: ("k\(index)", .integer(Int64(index)))
                }
            } + stride(from: 2, to: count, by: 3).map { ("n\($0)", .integer(Int64($0))) })
        #expect(document.merging(patch) == expected)
    }

    @Test("with a name twice in a document built in code, the first is the member a patch removes or merges into, as a scan would find")
    func duplicateNames() {
        let document = JSONValue.object([("a", .integer(1)), ("b", .integer(2)), ("a", .integer(3))])
        #expect(document.merging(.object([("a", .null)])) == .object([("b", .integer(2)), ("a", .integer(3))]))
        #expect(document.merging(.object([("a", .null), ("a", .integer(9))])) == .object([("b", .integer(2)), ("a", .integer(9))]))
        #expect(document.merging(.object([("a", .integer(7))])) == .object([("a", .integer(7)), ("b", .integer(2)), ("a", .integer(3))]))
    }

    /// The payload of `payload` with `override` merged at every shortening step, as fitting did before it merged once.
    static func fittedMergingEachStep(_ notification: Notification?, limit: Int, override: JSONValue) -> AlertFitting.Fitted? {
        AlertFitting.fit(notification, limit: limit) { PayloadOverride.apply(override, to: payload($0)) }
    }

    @Test("fitting with an override that leaves the text alone gives the payload merging at every shortening step gave")
    func overrideMergedOnce() throws {
        let overrides: [JSONValue] = [
            .object([("extra", .string(String(repeating: "x", count: 40)))]),
            .object([("extra", .string("\u{1}\n\"")), ("title", .object([]))]),
            .object([("gone", .null), ("n", .integer(12_345))]),
        ]
        let notifications = [
            Notification(title: "Title", body: String(repeating: "ab€\n", count: 30)),
            Notification(title: String(repeating: "é", count: 60), body: "b"), Notification(body: "short"),
        ]
        for override in overrides {
            for notification in notifications {
                for limit in [40, 60, 90, 150, 400] {
                    let once = try? AlertFitting.fit(notification, limit: limit, override: override, build: Self.payload).get()
                    #expect(
                        once == Self.fittedMergingEachStep(notification, limit: limit, override: override),
                        "\(override) \(notification) \(limit)")
                }
            }
        }
    }

    @Test("an override that replaces the notification's text is not shortened: the payload must fit as the override gives it")
    func overrideReplacingTheText() throws {
        let override = JSONValue.object([("body", .string(String(repeating: "o", count: 80)))])
        let notification = Notification(title: "Title", body: String(repeating: "b", count: 80))
        #expect(throws: AlertFitting.PayloadTooLarge(size: 107)) {
            try AlertFitting.fit(notification, limit: 100, override: override, build: Self.payload).get()
        }
        let fits = AlertFitting.fit(notification, limit: 120, override: override, build: Self.payload)
        #expect(
            try fits.get()
                == AlertFitting.Fitted(
                    payload: Array(#"{"title":"Title","body":"\#(String(repeating: "o", count: 80))"}"#.utf8),
                    notification: notification, truncated: false))
    }

    @Test("a 9 000-member override larger than the limit is refused with its merged size")
    func largeOverrideRefused() {
        let override = JSONValue.object((0..<9_000).map { ("k\($0)", .integer(1)) })
        let result = AlertFitting.fit(
            Notification(title: "T", body: String(repeating: "b", count: 3_000)), limit: 4_096,
            override: override, build: Self.payload)
        guard case .failure(let tooLarge) = result else {
            Issue.record("expected the payload to be refused")
            return
        }
        #expect(tooLarge.size > 4_096 + 9_000 * 6)
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

import PushCore
import Testing
@testable import HMSPlugin

@Suite("HMS message body")
struct HMSMessageTests {
    static let now: Int64 = 1_795_310_000_000

    static func android(ttl: Int64 = 60, at now: Int64 = now, collapseKey: String? = nil) throws -> JSONValue {
        let target = Target.hms("b", app: "104000001", token: "tok")
        let job = Job(
            id: "j", createdAt: Self.now, ttl: ttl, kind: .message, priority: .normal, userId: "u", collapseKey: collapseKey,
            targets: [target])
        return try #require(
            try JSONParser.parse(HMSMessage.body(Delivery(job: job, target: target, attempt: 1, now: now), tokens: ["tok"]))["message"]?[
                "android"])
    }

    @Test("ttl is the remaining TTL in seconds, at least 1 s and at most 15 days")
    func ttl() throws {
        #expect(try Self.android(ttl: 60, at: Self.now + 15_500)["ttl"] == .string("44s"))
        #expect(try Self.android(ttl: 0)["ttl"] == .string("1s"), "now or never: one second, never 0s")
        #expect(try Self.android(ttl: 60, at: Self.now + 59_900)["ttl"] == .string("1s"))
        #expect(try Self.android(ttl: 30 * 86_400)["ttl"] == .string("1296000s"))
        #expect(try Self.android(ttl: .max)["ttl"] == .string("1296000s"))
    }

    @Test("collapse_key is sent only when the job's key is one of Huawei's groups -1 to 100")
    func collapseKey() throws {
        #expect(try Self.android(collapseKey: "7")["collapse_key"] == .integer(7))
        #expect(try Self.android(collapseKey: "-1")["collapse_key"] == .integer(-1))
        #expect(try Self.android(collapseKey: "101")["collapse_key"] == nil)
        #expect(try Self.android(collapseKey: "chat-42")["collapse_key"] == nil)
        #expect(try Self.android()["collapse_key"] == nil)
    }

    @Test("data is the job's body, else its summary JSON")
    func data() throws {
        let target = Target.hms("b", token: "tok")
        var job = Job(
            id: "j", createdAt: Self.now, ttl: 60, kind: .call, priority: .high, userId: "u", data: ["callId": "c-1"], targets: [target])
        #expect(HMSMessage.data(job) == #"{"jobId":"j","kind":"call","data":{"callId":"c-1"}}"#)
        job.body = "opaque-blob"
        #expect(HMSMessage.data(job) == "opaque-blob")
    }
}

import PushCore
import Testing

@Suite("Outcome mapping: a provider's answer becomes an outcome")
struct OutcomeMappingTests {
    static let job = Job(
        id: "j-1", createdAt: 0, ttl: 60, kind: .message, priority: .normal, userId: "user-7",
        targets: [Target(bindingId: "b-1", provider: "webpush")])

    static func delivered(_ messageId: String?) -> Outcome {
        Outcome(
            job: job, target: job.targets[0], result: .delivered(providerMessageId: messageId, httpStatus: 201), attempts: 1, at: 1)
    }

    @Test("a 16 KiB Location header becomes a providerMessageId of at most 256 bytes, its start kept")
    func longMessageIdIsCapped() throws {
        let location = "https://push.example/m/" + String(repeating: "a", count: 16 << 10)
        let id = try #require(Self.delivered(location).providerMessageId)
        #expect(id.utf8.count == 256)
        #expect(location.hasPrefix(id))
        // What the idempotency record stores and the outcome topic carries is the capped id.
        #expect(Self.delivered(location).encoded().count < 1024)
    }

    @Test("the cut falls on a UTF-8 boundary: a character split by the 256th byte is left out whole")
    func capKeepsWholeCharacters() throws {
        let location = "x" + String(repeating: "é", count: 300)
        let id = try #require(Self.delivered(location).providerMessageId)
        #expect(id.utf8.count == 255)
        #expect(id == "x" + String(repeating: "é", count: 127))
    }

    @Test("ids within the cap, and no id, pass unchanged")
    func shortIdsPass() {
        let apnsId = "0A1B2C3D-4E5F-6789-ABCD-EF0123456789"
        #expect(Self.delivered(apnsId).providerMessageId == apnsId)
        let exact = String(repeating: "b", count: 256)
        #expect(Self.delivered(exact).providerMessageId == exact)
        #expect(Self.delivered(nil).providerMessageId == nil)
    }

    @Test(
        "a dead half of a dual binding is rejected with action none and names its token; a dead token of a whole binding removes it"
    )
    func deadHalfKeepsTheBinding() throws {
        let target = Self.job.targets[0]
        let half = Outcome(
            job: Self.job, target: target, result: .rejected(reason: "Unregistered", httpStatus: 410, token: .voip), attempts: 1, at: 1)
        #expect(half.status == .rejected)
        #expect(half.action == .none)
        #expect(half.token == .voip)
        let whole = Outcome(job: Self.job, target: target, result: .rejected(reason: "Unregistered", httpStatus: 410), attempts: 1, at: 1)
        #expect(whole.action == .removeBinding)
        #expect(whole.token == nil)
        let json = String(decoding: half.encoded(), as: UTF8.self)
        #expect(json.hasSuffix(#","token":"voip"}"#))
        #expect(Outcome(json: half.encoded()) == half)
        #expect(!String(decoding: whole.encoded(), as: UTF8.self).contains("token"), "an outcome without it keeps its bytes")
    }

    @Test("a target refused at decoding ends rejected with action none, 0 attempts and the rule it broke as the reason")
    func refusedTarget() {
        let target = Target(
            bindingId: "b-2", provider: .unnamed,
            refusal: JobRejection(.unknownProvider, #"targets[1].provider "pager" is not one of apns, fcm"#))
        let outcome = Outcome(refusedJob: Self.job, target: target, at: 7)
        #expect(outcome.status == .rejected)
        #expect(outcome.action == .none)
        #expect(outcome.attempts == 0)
        #expect(outcome.provider == "none")
        #expect(outcome.reason == #"unknown_provider: targets[1].provider "pager" is not one of apns, fcm; not sent"#)
    }
}

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
}

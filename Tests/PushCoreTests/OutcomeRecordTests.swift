import PushCore
import Testing

@Suite("Idempotency records: an outcome stored as what its job cannot give back")
struct OutcomeRecordTests {
    static let job = Job(
        id: "4f1c-job", createdAt: 0, ttl: 60, kind: .message, priority: .normal, userId: "user-7",
        targets: [Target(bindingId: "binding-1", provider: "apns", app: "com.example.chat")])
    static var target: Target { job.targets[0] }

    static func outcome(_ status: Outcome.Status) -> Outcome {
        Outcome(job: job, target: target, status: status, reason: nil, attempts: 1, at: 1_764_185_000_123)
    }

    @Test(
        "every outcome comes back whole from its record and its job",
        arguments: [
            Outcome(
                job: job, target: target, result: .delivered(providerMessageId: "0A1B2C3D-4E5F-6789-ABCD-EF0123456789", httpStatus: 200),
                attempts: 1, at: 1_764_185_000_123),
            Outcome(
                job: job, target: target, result: .delivered(providerMessageId: "0a1b2c3d-4e5f-6789-abcd-ef0123456789", httpStatus: 200),
                attempts: 2, at: 1),
            Outcome(
                job: job, target: target, result: .delivered(providerMessageId: "0a1b2c3d-4e5f-6789-ABCD-ef0123456789", httpStatus: 200),
                attempts: 1, at: 1),
            Outcome(
                job: job, target: target, result: .delivered(providerMessageId: "projects/p-1/messages/0:1764185000%31bd", httpStatus: 200),
                attempts: 1, at: 1),
            Outcome(
                job: job, target: target, result: .delivered(providerMessageId: nil, httpStatus: 201, truncated: true), attempts: 1, at: 9),
            Outcome(
                job: job, target: target, result: .rejected(reason: "Unregistered", httpStatus: 410, invalidSince: 1_764_000_000_000),
                attempts: 1, at: 5),
            Outcome(
                job: job, target: target, result: .failed(reason: "InvalidProviderToken ✗", httpStatus: 403, action: .checkCredentials),
                attempts: Int.max, at: -1),
            Outcome(job: job, target: target, status: .expired, reason: "TTL of 60 s passed before sending", attempts: 0, at: 0),
            Outcome(job: job, target: target, status: .deduplicated, reason: "", attempts: 0, at: Int64.max),
            Outcome(
                job: job, target: target,
                result: .rejected(reason: "Unregistered", httpStatus: 410, invalidSince: 1_764_000_000_000, token: .voip), attempts: 1,
                at: 5),
            Outcome(
                job: job, target: target, result: .rejected(reason: "BadDeviceToken", httpStatus: 400, token: .remote), attempts: 2, at: 6),
        ])
    func roundTrip(_ outcome: Outcome) {
        #expect(OutcomeRecord.decode(OutcomeRecord.encode(outcome), job: Self.job, target: Self.target) == outcome)
    }

    @Test("a delivered APNs push is stored in about 30 bytes, a tenth of its outcome JSON")
    func deliveredIsSmall() {
        let outcome = Outcome(
            job: Self.job, target: Self.target,
            result: .delivered(providerMessageId: "0A1B2C3D-4E5F-6789-ABCD-EF0123456789", httpStatus: 200), attempts: 1,
            at: 1_764_185_000_123)
        #expect(OutcomeRecord.encode(outcome).count <= 32)
        #expect(outcome.encoded().count > 250)
    }

    @Test("bytes that are not a whole record of this format are no record: cut short, trailing, or another format")
    func malformedIsNoRecord() {
        let record = OutcomeRecord.encode(Self.outcome(.failed).with(reason: "x"))
        for length in 0..<record.count {
            #expect(OutcomeRecord.decode(Array(record.prefix(length)), job: Self.job, target: Self.target) == nil)
        }
        #expect(OutcomeRecord.decode(record + [0], job: Self.job, target: Self.target) == nil)
        #expect(OutcomeRecord.decode([2] + record.dropFirst(), job: Self.job, target: Self.target) == nil)
        #expect(OutcomeRecord.decode(Array(Self.outcome(.delivered).encoded()), job: Self.job, target: Self.target) == nil, "JSON")
        #expect(OutcomeRecord.decode([1, 200, 0, 0, 1, 1], job: Self.job, target: Self.target) == nil, "a status out of range")
        #expect(OutcomeRecord.decode([1, 1, 0, 128, 1, 1, 7], job: Self.job, target: Self.target) == nil, "a dead token out of range")
        #expect(OutcomeRecord.decode([1, 1, 0, 128, 1, 1], job: Self.job, target: Self.target) == nil, "a dead token flagged, not stored")
        #expect(
            OutcomeRecord.decode(
                [1, 0, 0, 16, 1, 1] + [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], job: Self.job, target: Self.target)
                == nil, "a reason longer than the record")
    }
}

extension Outcome {
    fileprivate func with(reason: String) -> Outcome {
        var copy = self
        copy.reason = reason
        return copy
    }
}

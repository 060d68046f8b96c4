@testable import PushRedis
import PushCore

/// What Redis hands back, as the worker reads it: an HGETALL reply decoded into a retry
/// entry (`RedisRetryQueue.entry`), the entry's job decoded with its stored Kafka timestamp
/// and its TTL arithmetic and retry decision at a fuzzed time; a stored outcome record
/// (`Outcome(json:)`) read back and re-encoded. Never a trap; a decoded entry's attempt
/// count is ≥ 0 and leaves room for the next attempt's number; an outcome JSON survives a round
/// trip; an idempotency record (`OutcomeRecord.decode`, the compact form) read back for a job survives being
/// stored again. Input: now, then a reply tree (see `reply`), then the stored bytes (read as both forms).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRedisRecords(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let now = input.int64()
    if let entry = RedisRetryQueue.entry(id: "job/binding", from: reply(&input, depth: 0)) {
        precondition(entry.attempts >= 0 && entry.attempts < Int.max, "retry entry with \(entry.attempts) attempts")
        if let job = try? JobDecoder().decode(entry.jobBytes, fallbackCreatedAt: entry.fallbackCreatedAt) {
            let deadline = job.deadline
            _ = deadline.isExpired(at: now, attempt: entry.attempts + 1)
            _ = deadline.remainingSeconds(at: now)
            _ = deadline.remainingMilliseconds(at: now)
            if case .retry(let due) = RetryPolicy.default.decide(
                afterAttempt: entry.attempts + 1, now: now, deadline: deadline,
                retryAfter: nil, random: { $0 })
            {
                precondition(due >= now, "retry due before now")
            }
        }
    }
    let stored = input.rest()
    if let outcome = Outcome(json: stored) {
        precondition(Outcome(json: outcome.encoded()) == outcome, "\(outcome) does not survive encoding")
    }
    if let outcome = OutcomeRecord.decode(stored, job: recordJob, target: recordJob.targets[0]) {
        let again = OutcomeRecord.decode(OutcomeRecord.encode(outcome), job: recordJob, target: recordJob.targets[0])
        precondition(again == outcome, "\(outcome) does not survive its record")
        _ = outcome.encoded()
    }
    return 0
}

/// The job a fuzzed idempotency record is read back for.
private let recordJob = Job(
    id: "job", createdAt: 0, ttl: 60, kind: .message, priority: .normal, userId: "user",
    targets: [Target(bindingId: "binding", provider: "apns", app: "app")])

/// A reply: a type byte, then its value. Arrays name the HGETALL fields often, so the
/// decoder's interesting paths are reached: an array's even elements are a field name
/// picked by one byte, or any bulk string.
private func reply(_ input: inout FuzzInput, depth: Int) -> RedisValue {
    switch input.byte() % 8 {
    case 0: return .null
    case 1: return .integer(input.int64())
    case 2: return .status(input.string())
    case 3: return .error(input.string())
    case 4, 5:
        guard depth < 3 else { return .null }
        let fieldNames = ["job", "key", "hasKey", "fallbackCreatedAt", "binding", "attempts", "reason", "httpStatus"]
        var elements: [RedisValue] = []
        for index in 0..<Int(input.byte() % 24) {
            if index.isMultiple(of: 2), input.bool() {
                elements.append(.bulk(Array(fieldNames[Int(input.byte()) % fieldNames.count].utf8)))
            } else {
                elements.append(reply(&input, depth: depth + 1))
            }
        }
        return .array(elements)
    default: return .bulk(input.data())
    }
}

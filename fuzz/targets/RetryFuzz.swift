import Foundation
import PushCore
import PushHTTP

/// A Retry-After header, a job's createdAt/ttl (Kafka timestamps and job fields: any Int64),
/// attempt counts and clock values: the retry decision, the TTL arithmetic and the circuit
/// breaker never trap, and a retry is never due before `now` nor after the TTL.
/// Input: Retry-After text, now, createdAt, ttl, attempt, a Duration's components, the
/// policy and breaker settings (in the ranges the configuration accepts), jitter, then
/// (operation, clock) pairs for the breaker.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRetryDecisions(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let retryAfter = RetryAfter.parse(input.string(), now: Date(timeIntervalSince1970: 1_795_310_000))
    let now = input.int64()
    let deadline = Deadline(createdAt: input.int64(), ttlSeconds: input.int64())
    let attempt = input.int()
    let duration = Duration(
        secondsComponent: input.int64(), attosecondsComponent: input.int64(in: -999_999_999_999_999_999...999_999_999_999_999_999))
    let base = input.int64(in: 1...3_600_000)
    let policy = RetryPolicy(
        baseMilliseconds: base, maximumMilliseconds: input.int64(in: base...86_400_000),
        maximumAttempts: Int(input.int64(in: 1...100)))
    let breakerSettings = CircuitBreaker.Settings(
        failureThreshold: Int(input.int64(in: 1...100_000)),
        coolDownMilliseconds: input.int64(in: 100...3_600_000))
    let jitter = input.byte()
    let random: (Int64) -> Int64 = { upperBound in
        precondition(upperBound >= 0, "jitter window \(upperBound) is negative")
        switch jitter {
        case 0: return 0
        case 1: return upperBound
        default: return Int64((UInt64(jitter) &* 0x9E37_79B9_7F4A_7C15) % (UInt64(upperBound) + 1))
        }
    }

    if let retryAfter { precondition(retryAfter >= .zero, "negative Retry-After \(retryAfter)") }
    _ = retryAfter?.milliseconds
    _ = duration.milliseconds

    _ = deadline.expiresAt
    _ = deadline.isExpired(at: now, attempt: attempt)
    let remainingSeconds = deadline.remainingSeconds(at: now)
    let remaining = deadline.remainingMilliseconds(at: now)
    precondition(remainingSeconds >= 0 && remaining >= 0, "negative validity left")
    if !deadline.isNowOrNever, remaining > 0 { precondition(!deadline.isExpired(at: now), "expired with \(remaining) ms left") }

    _ = policy.backoffCeiling(afterAttempt: attempt)
    let decision = policy.decide(afterAttempt: attempt, now: now, deadline: deadline, retryAfter: retryAfter, random: random)
    if attempt >= policy.maximumAttempts {
        precondition(decision == .exhausted, "\(attempt) of \(policy.maximumAttempts) attempts: \(decision)")
    }
    check(decision, now: now, deadline: deadline)
    check(
        policy.decideHeldBack(now: now, deadline: deadline, circuitRetryAfter: retryAfter ?? duration, random: random),
        now: now, deadline: deadline)

    var breaker = CircuitBreaker(settings: breakerSettings)
    while !input.isAtEnd {
        let operation = input.byte()
        let clock = input.int64()
        switch operation % 4 {
        case 0:
            if case .rejected(_, let retryAt) = breaker.permit(at: clock) {
                precondition(retryAt >= clock, "circuit rejected at \(clock) with a retry at \(retryAt), before now")
            }
        case 1: breaker.record(.retryable(reason: "fuzz", httpStatus: 503), at: clock)
        case 2: breaker.record(.failed(reason: "fuzz", httpStatus: 401, action: .checkCredentials), at: clock)
        default: breaker.record(.delivered(providerMessageId: nil, httpStatus: 200), at: clock)
        }
    }
    return 0
}

private func check(_ decision: RetryPolicy.Decision, now: Int64, deadline: Deadline) {
    guard case .retry(let due) = decision else { return }
    precondition(due >= now, "retry due at \(due), before now \(now)")
    precondition(deadline.allowsRetry(dueAt: due), "retry due at \(due), after the TTL ends at \(deadline.expiresAt)")
}

import Testing
@testable import PushCore

@Suite("Numbers from outside never trap: decisions saturate and clamp")
struct HostileNumbersTests {
    @Test("saturating arithmetic clamps at Int64's ends instead of trapping")
    func saturation() {
        #expect(Int64.max.adding(saturating: 1) == .max)
        #expect(Int64.min.adding(saturating: -1) == .min)
        #expect(Int64(5).subtracting(saturating: .min) == .max)
        #expect(Int64.min.subtracting(saturating: 1_795_310_000_000) == .min)
        #expect(Int64(99_999_999_999_999_999).multiplied(saturating: 1000) == .max)
        #expect(Int64(-3).multiplied(saturating: .max) == .min)
        #expect(Int64(clamping: 1e300) == .max)
        #expect(Int64(clamping: -Double.infinity) == .min)
        #expect(Int64(clamping: Double.nan) == 0)
        #expect(Duration.seconds(Int64.max).milliseconds == .max)
        #expect(Duration.seconds(99_999_999_999_999_999).milliseconds == .max)
        #expect(Duration.milliseconds(1500).milliseconds == 1500)
    }

    @Test("a Retry-After far beyond the TTL ends the target expired at once instead of retrying or trapping")
    func retryAfterBeyondTTL() {
        let policy = RetryPolicy.default
        let now: Int64 = 1_795_310_000_000
        let deadline = Deadline(createdAt: now, ttlSeconds: 30)
        let decision = policy.decide(
            afterAttempt: 1, now: now, deadline: deadline, retryAfter: .seconds(99_999_999_999_999_999),
            random: { $0 })
        #expect(decision == .expired)
        let held = policy.decideHeldBack(now: now, deadline: deadline, circuitRetryAfter: .seconds(Int64.max), random: { $0 })
        #expect(held == .expired)
    }

    @Test("a Retry-After is honoured up to one day, never more, even within a longer TTL")
    func retryAfterCappedAtOneDay() {
        let now: Int64 = 1_795_310_000_000
        let deadline = Deadline(createdAt: now, ttlSeconds: 2_419_200)
        let decision = RetryPolicy.default.decide(
            afterAttempt: 1, now: now, deadline: deadline,
            retryAfter: .seconds(99_999_999_999_999_999), random: { $0 })
        #expect(decision == .retry(atMilliseconds: now + 86_400_000))
        let shortHint = RetryPolicy.default.decide(
            afterAttempt: 1, now: now, deadline: deadline, retryAfter: .seconds(7), random: { _ in 0 })
        #expect(shortHint == .retry(atMilliseconds: now + 7000))
    }

    @Test(
        "extreme clocks and creation times give answers, not traps", arguments: [Int64.min, Int64.min + 1, -1, 0, Int64.max - 1, Int64.max])
    func extremeTimes(_ value: Int64) {
        let deadline = Deadline(createdAt: value, ttlSeconds: 2_419_200)
        _ = deadline.expiresAt
        _ = deadline.remainingSeconds(at: 1_795_310_000_000)
        _ = deadline.remainingMilliseconds(at: value)
        _ = deadline.isExpired(at: value)
        let policy = RetryPolicy(baseMilliseconds: .max, maximumMilliseconds: .max, maximumAttempts: .max)
        _ = policy.decide(afterAttempt: .max, now: value, deadline: deadline, retryAfter: .seconds(Int64.max), random: { $0 })
        _ = policy.decideHeldBack(now: value, deadline: deadline, circuitRetryAfter: .seconds(Int64.max), random: { $0 })
        var breaker = CircuitBreaker(settings: .init(failureThreshold: 1, coolDownMilliseconds: .max))
        breaker.record(.failed(reason: "x", httpStatus: 403, action: .checkCredentials), at: value)
        _ = breaker.permit(at: value)
        _ = breaker.permit(at: .max)
        _ = ShedPolicy(lagThresholdMilliseconds: 1).sheds(
            kind: .message, deadline: deadline, lane: .normal, lagMilliseconds: .max, now: value)
    }
}

/// Exponential backoff with full jitter, bounded by an attempt budget and the job's TTL.
public struct RetryPolicy: Sendable, Equatable {
    public var baseMilliseconds: Int64
    public var maximumMilliseconds: Int64
    /// Total attempts allowed, the first included.
    public var maximumAttempts: Int

    public static let `default` = RetryPolicy(baseMilliseconds: 1000, maximumMilliseconds: 60_000, maximumAttempts: 5)

    public init(baseMilliseconds: Int64, maximumMilliseconds: Int64, maximumAttempts: Int) {
        self.baseMilliseconds = baseMilliseconds
        self.maximumMilliseconds = maximumMilliseconds
        self.maximumAttempts = maximumAttempts
    }

    /// The longest provider hint honoured: a `Retry-After` beyond it is treated as this long
    /// (and the TTL usually ends first).
    public static let maximumRetryAfter = Duration.seconds(86_400)

    public enum Decision: Sendable, Equatable {
        case retry(atMilliseconds: Int64)
        case expired
        case exhausted
    }

    /// The ceiling of the jitter window after `attempt` failed attempts.
    public func backoffCeiling(afterAttempt attempt: Int) -> Int64 {
        let exponent = attempt <= 1 ? 0 : min(attempt - 1, 40)
        let (scaled, overflow) = baseMilliseconds.multipliedReportingOverflow(by: Int64(1) << exponent)
        return overflow ? maximumMilliseconds : min(scaled, maximumMilliseconds)
    }

    /// What to do after attempt number `attempt` failed transiently at `now`.
    /// - Parameters:
    ///   - retryAfter: the provider's hint; the retry is never earlier than it.
    ///   - random: returns a value in 0...upperBound (injected so tests can pin the jitter).
    /// A push the open circuit held back was not sent, so it spends no attempt: it is due
    /// when the circuit lets a probe through, spread by up to one backoff base, unless the TTL ends first.
    public func decideHeldBack(
        now: Int64, deadline: Deadline, circuitRetryAfter: Duration,
        random: (Int64) -> Int64 = { Int64.random(in: 0...$0) }
    ) -> Decision {
        guard !deadline.isNowOrNever else { return .expired }
        let wait = max(0, circuitRetryAfter.clamped(to: Self.maximumRetryAfter).milliseconds)
        // The spread is ours, like the backoff: it never carries a retry the circuit allows in time past the TTL.
        let beforeExpiry = deadline.remainingMilliseconds(at: now).subtracting(saturating: wait + 1)
        let due = now.adding(saturating: wait).adding(saturating: random(max(0, min(baseMilliseconds, beforeExpiry))))
        return deadline.allowsRetry(dueAt: due) ? .retry(atMilliseconds: due) : .expired
    }

    public func decide(
        afterAttempt attempt: Int, now: Int64, deadline: Deadline, retryAfter: Duration?,
        random: (Int64) -> Int64 = { Int64.random(in: 0...$0) }
    ) -> Decision {
        guard attempt < maximumAttempts else { return .exhausted }
        guard !deadline.isNowOrNever else { return .expired }
        // The backoff is ours to choose, so it is drawn within what is left of the TTL: our jitter never pushes a
        // retry past the TTL (a call's 30 s must not run out behind a backoff it did not need).
        let beforeExpiry = max(0, deadline.remainingMilliseconds(at: now) - 1)
        var delay = random(min(backoffCeiling(afterAttempt: attempt), beforeExpiry))
        if let retryAfter {
            delay = max(delay, retryAfter.clamped(to: Self.maximumRetryAfter).milliseconds)
        }
        // The provider's hint (Retry-After, a scope's rate-limit hold) is not ours: the retry is never earlier, and a
        // hint past the TTL cannot be honoured (the retry would be due when nothing may be sent): the job ends
        // `expired` now, as PRODUCT.md's TTL rule says, instead of waiting in the retry queue for its TTL to pass.
        let due = now.adding(saturating: max(0, delay))
        return deadline.allowsRetry(dueAt: due) ? .retry(atMilliseconds: due) : .expired
    }
}

/// TTL arithmetic, in one place: when a job stops being deliverable and how much
/// validity is left to hand to a provider.
public struct Deadline: Sendable, Equatable {
    /// Milliseconds since the Unix epoch.
    public let createdAt: Int64
    public let ttlSeconds: Int64

    public init(createdAt: Int64, ttlSeconds: Int64) {
        self.createdAt = createdAt
        self.ttlSeconds = ttlSeconds
    }

    /// `ttl: 0` means "now or never": one immediate attempt, never a retry.
    public var isNowOrNever: Bool { ttlSeconds == 0 }

    /// Milliseconds since the epoch after which nothing may be sent.
    public var expiresAt: Int64 {
        createdAt.adding(saturating: ttlSeconds.multiplied(saturating: 1000))
    }

    /// Whether a first attempt at `now` is too late. A now-or-never job is sent on its first attempt.
    public func isExpired(at now: Int64, attempt: Int = 1) -> Bool {
        if isNowOrNever { return attempt > 1 }
        return now >= expiresAt
    }

    /// Whole seconds of validity left at `now`, rounded down, never negative; 0 for now-or-never.
    public func remainingSeconds(at now: Int64) -> Int64 {
        if isNowOrNever { return 0 }
        return max(0, expiresAt.subtracting(saturating: now) / 1000)
    }

    /// Milliseconds of validity left at `now`, never negative; 0 for now-or-never.
    public func remainingMilliseconds(at now: Int64) -> Int64 {
        if isNowOrNever { return 0 }
        return max(0, expiresAt.subtracting(saturating: now))
    }

    /// Whether a retry due at `dueAt` would still be inside the TTL.
    public func allowsRetry(dueAt: Int64) -> Bool {
        !isNowOrNever && dueAt < expiresAt
    }
}

#if canImport(Glibc)
    import Glibc
#endif

/// A source of wall-clock milliseconds since the Unix epoch, injected where a rule depends on the time (tests pass
/// their own). Not a `Swift.Clock`: contracts carry epoch milliseconds, not instants of a monotonic clock.
public typealias WallClock = @Sendable () -> Int64

/// Wall-clock milliseconds since the Unix epoch: the unit of every timestamp in the contracts.
public func currentTimeMilliseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec).multiplied(saturating: 1000).adding(saturating: Int64(now.tv_nsec) / 1_000_000)
}

#if canImport(Glibc)
import Glibc
#endif

/// Wall-clock milliseconds since the Unix epoch: the unit of every timestamp in the contracts.
public func currentTimeMilliseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec).multiplied(saturating: 1000).adding(saturating: Int64(now.tv_nsec) / 1_000_000)
}

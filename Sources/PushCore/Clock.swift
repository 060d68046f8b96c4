import Foundation

/// Wall-clock milliseconds since the Unix epoch: the unit of every timestamp in the contracts.
public func currentTimeMilliseconds() -> Int64 {
    Int64((Date().timeIntervalSince1970 * 1000).rounded(.down))
}

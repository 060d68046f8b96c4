import PushCore
import Synchronization

/// A settable clock (milliseconds since the epoch) for rules that span minutes or hours.
public final class FakeClock: Sendable {
    private let now: Atomic<Int64>

    public init(start: Int64 = currentTimeMilliseconds()) { now = Atomic(start) }

    public var milliseconds: Int64 { now.load(ordering: .relaxed) }
    public func advance(minutes: Int64) { now.add(minutes * 60_000, ordering: .relaxed) }
    public func advance(milliseconds: Int64) { now.add(milliseconds, ordering: .relaxed) }
}

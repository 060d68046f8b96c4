import Synchronization

/// Whether the shared store (Redis) answers. While it does not, the consumer pauses
/// (jobs stay uncommitted) and in-flight work waits for it.
public final class StoreHealth: Sendable {
    private let healthy = Atomic<Bool>(true)

    public init() {}

    public var isHealthy: Bool { healthy.load(ordering: .relaxed) }

    /// Returns true when this changed the state.
    @discardableResult
    func set(_ value: Bool) -> Bool { healthy.exchange(value, ordering: .relaxed) != value }
}

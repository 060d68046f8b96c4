/// The wait before a failed store or broker operation is tried again: it doubles after each failure, up to its longest.
struct RetryWait: Sendable {
    let duration: Duration
    let longest: Duration

    /// The wait after the next failure.
    var next: RetryWait { RetryWait(duration: min(duration * 2, longest), longest: longest) }

    /// A store operation (recording outcomes, the checks before a send): 100 ms, doubling to 2 s.
    static let store = RetryWait(duration: .milliseconds(100), longest: .seconds(2))
    /// Publishing to the broker: 100 ms, doubling to 5 s.
    static let publish = RetryWait(duration: .milliseconds(100), longest: .seconds(5))
}

/// The waits between the tries of one store operation. There is no deadline: a job abandoned while its lane still owns
/// its partition would leave its offset uncommitted, and the partition's commits stuck behind it, until the next
/// rebalance; the wait ends when the store answers, or when a stop or the partition's revocation cancels it.
struct StoreRetries: Sendable {
    private var wait = RetryWait.store

    /// Waits before the next try; false when a stop or a revocation cancelled the wait.
    mutating func pause() async -> Bool {
        do { try await Task.sleep(for: wait.duration) } catch { return false }
        wait = wait.next
        return true
    }
}

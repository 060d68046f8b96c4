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

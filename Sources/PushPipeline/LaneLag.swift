/// How late one lane is: the age of the oldest message it has not started, whether that message is held
/// (consumed, waiting for its turn) or still waits in Kafka. Sampled on a timer (`DeliveryPipeline`, every
/// second), not when a batch is consumed, so an idle lane goes back to 0 and a lane that stops reading shows
/// its lag growing.
///
/// What waits in Kafka is not seen, only bounded by the lane's last read:
/// - a read that took everything the consumer had fetched (fewer messages than asked for) caught the lane
///   up: whatever waits now was produced after that read;
/// - a read that filled its batch left more behind, produced about when the last message it took was (within
///   a partition, no earlier).
///
/// A lane that reads at least every `readingGap` (every 100 ms while it has room) and was caught up at its
/// last read shows only its held messages' age, 0 when it holds none. A lane that stops reading (at capacity,
/// paused while the shared store is down, its thread stuck in a call) shows the time since it last read, or
/// since the last message it read was produced when that read left more behind: what was produced since waits for it.
struct LaneLag: Sendable, Equatable {
    /// Reads further apart than this: the lane has stopped reading (ms).
    static let readingGap: Int64 = 1000

    /// When the lane last read (ms since the epoch, the worker's clock).
    private var lastRead: Int64
    /// Whether the last read took everything the consumer had fetched.
    private var caughtUp = true
    /// The Kafka timestamp of the last message of the last read, when that read filled its batch.
    private var lastLeftBehind: Int64?

    /// A lane that starts reading at `start`: no message is known to wait yet.
    init(startingAt start: Int64) { lastRead = start }

    /// The lane read `count` messages of the `maximum` it asked for, the last of them produced at `lastTimestamp`.
    mutating func read(_ count: Int, of maximum: Int, lastTimestamp: Int64?, at now: Int64) {
        lastRead = now
        caughtUp = count < maximum
        lastLeftBehind = caughtUp ? nil : lastTimestamp
    }

    /// The lag at `now` (ms): the older of the oldest held message (`oldestHeld`, its Kafka timestamp) and
    /// the oldest message that may wait unread.
    func milliseconds(at now: Int64, oldestHeld: Int64?) -> Int64 {
        let held = oldestHeld.map { now.subtracting(saturating: $0) } ?? 0
        let unread: Int64
        if caughtUp {
            let sinceRead = now.subtracting(saturating: lastRead)
            unread = sinceRead > Self.readingGap ? sinceRead : 0
        } else {
            unread = now.subtracting(saturating: lastLeftBehind ?? lastRead)
        }
        return max(held, unread, 0)
    }
}

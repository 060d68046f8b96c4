import PushCore

/// The commit point of one partition when jobs finish out of order: the offset after
/// the longest run of finished jobs that starts at the oldest unfinished one.
public struct PartitionWatermark: Sendable {
    private var pending: [Int64] = []
    /// When each pending offset was consumed (ms), in the same order.
    private var consumedAt: [Int64] = []
    private var head = 0
    private var finished = Set<Int64>()

    public init() {}

    public var inFlight: Int { pending.count - head }

    /// When the oldest unfinished offset (the next commit point) was consumed; nil when none is unfinished.
    public var oldestUnfinishedConsumedAt: Int64? { head < pending.count ? consumedAt[head] : nil }

    /// Records an offset consumed at `now` (ms). Offsets arrive in increasing order; one that does not
    /// (the consumer was rewound, e.g. by a reset or a re-assignment) starts the partition
    /// over: returns false, and the caller must forget the jobs begun before.
    public mutating func begin(_ offset: Int64, at now: Int64 = 0) -> Bool {
        if let last = pending.last, offset <= last {
            pending = [offset]
            consumedAt = [now]
            head = 0
            finished.removeAll()
            return false
        }
        pending.append(offset)
        consumedAt.append(now)
        return true
    }

    /// Marks `offset` finished; returns the new offset to commit when the watermark moved.
    public mutating func finish(_ offset: Int64) -> Int64? {
        guard head < pending.count, offset >= pending[head] else { return nil }
        finished.insert(offset)
        var committable: Int64?
        while head < pending.count, finished.remove(pending[head]) != nil {
            committable = pending[head].adding(saturating: 1)
            head += 1
        }
        if head > 1024, head * 2 > pending.count {
            pending.removeFirst(head)
            consumedAt.removeFirst(head)
            head = 0
        }
        return committable
    }
}

/// Watermarks of every partition this consumer owns. Each partition's watermark has a
/// generation: a completion from an earlier generation (before a revocation or a rewind)
/// is ignored, so it can never move the new commit point.
public struct PartitionCommitPoints: Sendable {
    private var partitions: [TopicPartition: PartitionWatermark] = [:]
    private var generations: [TopicPartition: UInt64] = [:]
    private var nextGeneration: UInt64 = 0

    public init() {}

    public var inFlight: Int { partitions.values.reduce(0) { $0 + $1.inFlight } }

    /// When the oldest unfinished offset of any partition was consumed (ms); nil when every consumed job finished.
    public var oldestUnfinishedConsumedAt: Int64? { partitions.values.compactMap(\.oldestUnfinishedConsumedAt).min() }

    public func owns(_ topicPartition: TopicPartition) -> Bool { partitions[topicPartition] != nil }

    public mutating func assign(_ topicPartitions: [TopicPartition]) {
        for topicPartition in topicPartitions { restart(topicPartition) }
    }

    /// Forgets revoked partitions: late completions for them are no longer committed here.
    public mutating func revoke(_ topicPartitions: [TopicPartition]) {
        for topicPartition in topicPartitions {
            partitions[topicPartition] = nil
            generations[topicPartition] = nil
        }
    }

    /// Records a consumed offset; returns the generation its completion must name.
    // `begin` and `finish` run for every job: they take the watermark out of the dictionary and put
    // it back rather than change it through the dictionary's `_modify` accessor, whose coroutine
    // frame is allocated on the heap on every access.
    public mutating func begin(_ topicPartition: TopicPartition, offset: Int64, at now: Int64 = 0) -> UInt64 {
        guard var watermark = partitions.removeValue(forKey: topicPartition) else {
            restart(topicPartition, at: offset, now: now)
            return generations[topicPartition]!
        }
        if watermark.begin(offset, at: now) {
            partitions[topicPartition] = watermark
        } else {
            restart(topicPartition, at: offset, now: now)
        }
        return generations[topicPartition]!
    }

    /// Marks a job finished; returns the new offset to commit when the watermark moved.
    public mutating func finish(_ topicPartition: TopicPartition, offset: Int64, generation: UInt64) -> Int64? {
        guard generations[topicPartition] == generation, var watermark = partitions.removeValue(forKey: topicPartition) else { return nil }
        defer { partitions[topicPartition] = watermark }
        return watermark.finish(offset)
    }

    private mutating func restart(_ topicPartition: TopicPartition, at offset: Int64? = nil, now: Int64 = 0) {
        nextGeneration += 1
        generations[topicPartition] = nextGeneration
        var watermark = PartitionWatermark()
        if let offset { _ = watermark.begin(offset, at: now) }
        partitions[topicPartition] = watermark
    }
}

/// The commit point of one partition when jobs finish out of order: the offset after
/// the longest run of finished jobs that starts at the oldest unfinished one.
public struct PartitionWatermark: Sendable {
    private var pending: [Int64] = []
    private var head = 0
    private var finished = Set<Int64>()

    public init() {}

    public var inFlight: Int { pending.count - head }

    /// Records a consumed offset; offsets arrive in increasing order.
    public mutating func begin(_ offset: Int64) {
        precondition(pending.last.map { $0 < offset } ?? true, "offsets must increase")
        pending.append(offset)
    }

    /// Marks `offset` finished; returns the new offset to commit when the watermark moved.
    public mutating func finish(_ offset: Int64) -> Int64? {
        guard head < pending.count, offset >= pending[head] else { return nil }
        finished.insert(offset)
        var committable: Int64?
        while head < pending.count, finished.remove(pending[head]) != nil {
            committable = pending[head] + 1
            head += 1
        }
        if head > 1024, head * 2 > pending.count {
            pending.removeFirst(head)
            head = 0
        }
        return committable
    }
}

/// Watermarks of every partition this consumer owns.
public struct OffsetTracker: Sendable {
    private var partitions: [TopicPartition: PartitionWatermark] = [:]

    public init() {}

    public var inFlight: Int { partitions.values.reduce(0) { $0 + $1.inFlight } }

    public func inFlight(in topicPartitions: [TopicPartition]) -> Int {
        topicPartitions.reduce(0) { $0 + (partitions[$1]?.inFlight ?? 0) }
    }

    public func owns(_ topicPartition: TopicPartition) -> Bool { partitions[topicPartition] != nil }

    public mutating func assign(_ topicPartitions: [TopicPartition]) {
        for topicPartition in topicPartitions where partitions[topicPartition] == nil {
            partitions[topicPartition] = PartitionWatermark()
        }
    }

    /// Forgets revoked partitions: late completions for them are no longer committed here.
    public mutating func revoke(_ topicPartitions: [TopicPartition]) {
        for topicPartition in topicPartitions { partitions[topicPartition] = nil }
    }

    public mutating func begin(_ topicPartition: TopicPartition, offset: Int64) {
        partitions[topicPartition, default: PartitionWatermark()].begin(offset)
    }

    public mutating func finish(_ topicPartition: TopicPartition, offset: Int64) -> Int64? {
        partitions[topicPartition]?.finish(offset)
    }
}

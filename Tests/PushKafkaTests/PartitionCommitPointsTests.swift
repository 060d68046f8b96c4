import Testing
@testable import PushKafka

@Suite("Commit watermark with out-of-order completion")
struct PartitionCommitPointsTests {
    @Test("a finished job after an unfinished one does not move the commit point")
    func waitsForTheOldest() {
        var watermark = PartitionWatermark()
        for offset in [10, 11, 12] as [Int64] { _ = watermark.begin(offset) }
        #expect(watermark.finish(11) == nil)
        #expect(watermark.finish(12) == nil)
        #expect(watermark.finish(10) == 13)
        #expect(watermark.inFlight == 0)
    }

    @Test("the oldest uncommitted offset ages from when it was consumed, and the next takes its place once it finishes")
    func oldestUnfinishedAge() {
        var tracker = PartitionCommitPoints()
        let first = TopicPartition(topic: "t", partition: 0)
        let second = TopicPartition(topic: "t", partition: 1)
        tracker.assign([first, second])
        #expect(tracker.oldestUnfinishedConsumedAt == nil)
        let generation = tracker.begin(first, offset: 10, at: 1_000)
        _ = tracker.begin(first, offset: 11, at: 2_000)
        _ = tracker.begin(second, offset: 3, at: 1_500)
        #expect(tracker.oldestUnfinishedConsumedAt == 1_000)
        #expect(tracker.finish(first, offset: 11, generation: generation) == nil)
        #expect(tracker.oldestUnfinishedConsumedAt == 1_000, "a later job finished first: the oldest still waits")
        #expect(tracker.finish(first, offset: 10, generation: generation) == 12)
        #expect(tracker.oldestUnfinishedConsumedAt == 1_500, "the other partition's job is the oldest now")
    }

    @Test("the commit point is the offset after the contiguous finished run")
    func contiguousRun() {
        var watermark = PartitionWatermark()
        for offset in [5, 6, 7, 8] as [Int64] { _ = watermark.begin(offset) }
        #expect(watermark.finish(5) == 6)
        #expect(watermark.finish(7) == nil)
        #expect(watermark.finish(6) == 8)
        #expect(watermark.inFlight == 1)
    }

    @Test("gaps in offsets (compaction, transaction markers) do not block the watermark")
    func gaps() {
        var watermark = PartitionWatermark()
        for offset in [3, 9, 20] as [Int64] { _ = watermark.begin(offset) }
        #expect(watermark.finish(3) == 4)
        #expect(watermark.finish(9) == 10)
        #expect(watermark.finish(20) == 21)
    }

    @Test("a completion for a partition given up after revocation is ignored")
    func revoked() {
        let partition = TopicPartition(topic: "push.jobs", partition: 0)
        var tracker = PartitionCommitPoints()
        tracker.assign([partition])
        let generation = tracker.begin(partition, offset: 1)
        tracker.revoke([partition])
        #expect(tracker.finish(partition, offset: 1, generation: generation) == nil)
        #expect(tracker.inFlight == 0)
        tracker.assign([partition])
        let fresh = tracker.begin(partition, offset: 1)
        #expect(tracker.finish(partition, offset: 1, generation: generation) == nil, "a completion from before the revocation")
        #expect(tracker.finish(partition, offset: 1, generation: fresh) == 2)
    }

    @Test("a rewound partition (offsets going back) starts over instead of crashing; old completions are ignored")
    func rewind() {
        let partition = TopicPartition(topic: "push.jobs", partition: 0)
        var tracker = PartitionCommitPoints()
        tracker.assign([partition])
        let old = tracker.begin(partition, offset: 10)
        _ = tracker.begin(partition, offset: 11)
        let rewound = tracker.begin(partition, offset: 5)
        #expect(rewound != old)
        #expect(tracker.finish(partition, offset: 11, generation: old) == nil)
        _ = tracker.begin(partition, offset: 6)
        #expect(tracker.finish(partition, offset: 5, generation: rewound) == 6)
        #expect(tracker.finish(partition, offset: 6, generation: rewound) == 7)
    }

    @Test("thousands of out-of-order completions end at the last offset + 1")
    func manyShuffled() {
        var watermark = PartitionWatermark()
        let offsets = Array(Int64(0)..<5000)
        offsets.forEach { _ = watermark.begin($0) }
        var highest: Int64 = 0
        for offset in offsets.shuffled() {
            if let committable = watermark.finish(offset) {
                #expect(committable > highest)
                highest = committable
            }
        }
        #expect(highest == 5000)
    }
}

import Testing
@testable import PushKafka

@Suite("Commit watermark with out-of-order completion")
struct OffsetWatermarkTests {
    @Test("a finished job after an unfinished one does not move the commit point")
    func waitsForTheOldest() {
        var watermark = PartitionWatermark()
        for offset in [10, 11, 12] as [Int64] { watermark.begin(offset) }
        #expect(watermark.finish(11) == nil)
        #expect(watermark.finish(12) == nil)
        #expect(watermark.finish(10) == 13)
        #expect(watermark.inFlight == 0)
    }

    @Test("the commit point is the offset after the contiguous finished run")
    func contiguousRun() {
        var watermark = PartitionWatermark()
        for offset in [5, 6, 7, 8] as [Int64] { watermark.begin(offset) }
        #expect(watermark.finish(5) == 6)
        #expect(watermark.finish(7) == nil)
        #expect(watermark.finish(6) == 8)
        #expect(watermark.inFlight == 1)
    }

    @Test("gaps in offsets (compaction, transaction markers) do not block the watermark")
    func gaps() {
        var watermark = PartitionWatermark()
        for offset in [3, 9, 20] as [Int64] { watermark.begin(offset) }
        #expect(watermark.finish(3) == 4)
        #expect(watermark.finish(9) == 10)
        #expect(watermark.finish(20) == 21)
    }

    @Test("a completion for a partition given up after revocation is ignored")
    func revoked() {
        let partition = TopicPartition(topic: "push.jobs", partition: 0)
        var tracker = OffsetTracker()
        tracker.assign([partition])
        tracker.begin(partition, offset: 1)
        tracker.revoke([partition])
        #expect(tracker.finish(partition, offset: 1) == nil)
        #expect(tracker.inFlight == 0)
    }

    @Test("thousands of out-of-order completions end at the last offset + 1")
    func manyShuffled() {
        var watermark = PartitionWatermark()
        let offsets = Array(Int64(0)..<5000)
        offsets.forEach { watermark.begin($0) }
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

import PushCore
import Testing

@testable import PushRedis

@Suite("Idempotency records in hashes per slice of time")
struct RecordBucketsTests {
    @Test("a slice is an eighth of the retention, at least a second; its length is part of the key")
    func sliceLength() {
        #expect(RecordBuckets(retention: .seconds(3_600)).slice == 450_000)
        #expect(RecordBuckets(retention: .seconds(60)).slice == 7_500)
        #expect(RecordBuckets(retention: .milliseconds(200)).slice == 1_000)
        let digest = RedisKeys.recordDigest(bindingId: "b", jobId: "j")
        #expect(digest.count == 16)
        let key = RecordBuckets(retention: .seconds(3_600)).bucket(of: digest, at: 1_800_000_000_000).text
        #expect(key == "push:{r:\(RecordBuckets.shard(of: digest))}450000:4000000")
    }

    @Test(
        "whenever a record was written in the last retention, by a clock up to a slice off, its hash is among the at most 12 read",
        arguments: [Duration.seconds(60), .seconds(3_600), .seconds(2_592_000), .milliseconds(1_500)])
    func readersFindEveryLiveRecord(_ retention: Duration) {
        let buckets = RecordBuckets(retention: retention)
        let digest = RedisKeys.recordDigest(bindingId: "binding", jobId: "job")
        let start: Int64 = 1_800_000_000_000
        let step: Int64 = max(1, buckets.slice / 7)
        var written = start
        while written < start + 3 * buckets.slice {
            let hash = buckets.bucket(of: digest, at: written)
            var age = -buckets.slice
            while age <= buckets.retention + buckets.slice {
                let read = buckets.buckets(of: digest, at: written + age)
                #expect(read.count <= 12)
                #expect(read.contains(hash), "written at +\(written - start) ms, read \(age) ms later")
                age += step
            }
            written += step
        }
    }

    @Test("a hash lives from the retention to the retention and one slice, counted from its write")
    func lifetime() {
        let buckets = RecordBuckets(retention: .seconds(3_600))
        #expect(buckets.lifetime(at: 1_800_000_000_000) == 3_600_000 + 450_000, "written as its slice starts")
        #expect(buckets.lifetime(at: 1_800_000_449_999) == 3_600_001, "written as its slice ends")
        #expect(buckets.lifetime(at: -5) == 3_600_000 + 450_000, "a clock before 1970 counts as 0")
    }

    @Test("records spread over the shards")
    func shardsSpread() {
        let shards = Set((0..<5_000).map { RecordBuckets.shard(of: RedisKeys.recordDigest(bindingId: "b\($0)", jobId: "j\($0)")) })
        #expect(shards.count > RecordBuckets.shardCount * 9 / 10)
        #expect(shards.allSatisfy { (0..<RecordBuckets.shardCount).contains($0) })
    }
}

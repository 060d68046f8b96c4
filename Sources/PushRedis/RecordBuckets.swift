import PushCore

/// Where idempotency records live: fields of hashes that many records share, one hash per slice of time and shard,
/// so a record costs a hash field (65–135 bytes in Redis 7.0, as measured) rather than a key with an expiry of its own (at
/// least 165 bytes on Redis 7.0).
///
/// Time is cut into slices of an eighth of the retention, at least a second. A record written during slice `i` is the
/// field `<digest>` (16 bytes: `RedisKeys.recordDigest`) of the hash `push:{r:<shard>}<slice ms>:<i>`, where the shard
/// is one of `shardCount`, taken from the digest. The hash expires `retention` after its slice ends, so a record
/// is kept for between `retention` and `retention` plus one slice. A reader looks in every slice that a record
/// written during the last `retention` can be in, with one more slice on each side for replicas whose clocks differ
/// by up to a slice: at most 12 slices, all of one shard (one hash tag), so one script reads them.
///
/// The slice length is part of the key, so replicas configured with different retentions never read each other's
/// slices as their own (nor find each other's records).
struct RecordBuckets: Sendable {
    /// Enough hashes per slice that each stays small (expiring a hash frees all its fields at once, so a
    /// smaller hash blocks Redis for less), few enough that a hash holds many records.
    static let shardCount = 1024

    let retention: Int64
    let slice: Int64

    init(retention: Duration) {
        self.retention = max(1, retention.milliseconds)
        slice = max(1000, self.retention / 8)
    }

    /// The slice that `now` falls in.
    func slice(at now: Int64) -> Int64 { max(0, now) / slice }

    /// The hash that a record written at `now` goes to.
    func bucket(of digest: [UInt8], at now: Int64) -> RedisKeys.RecordBucketKey {
        RedisKeys.RecordBucketKey(shard: Self.shard(of: digest), sliceLength: slice, slice: slice(at: now))
    }

    /// Every hash a record written within the last `retention` (by a clock up to a slice off) can be in.
    func buckets(of digest: [UInt8], at now: Int64) -> [RedisKeys.RecordBucketKey] {
        let now = max(0, now)
        let first = max(0, now.subtracting(saturating: retention).subtracting(saturating: slice)) / slice
        let last = now.adding(saturating: slice) / slice
        let shard = Self.shard(of: digest)
        return (first...last).map { RedisKeys.RecordBucketKey(shard: shard, sliceLength: slice, slice: $0) }
    }

    /// Milliseconds from `now` until the hash written at `now` expires: the end of its slice plus the retention.
    func lifetime(at now: Int64) -> Int64 {
        let now = max(0, now)
        return (now / slice + 1).multiplied(saturating: slice).subtracting(saturating: now).adding(saturating: retention)
    }

    static func shard(of digest: [UInt8]) -> Int { (Int(digest[0]) << 8 | Int(digest[1])) % shardCount }
}

import PushCore
import PushCrypto

/// The key scheme. Everything about one binding shares the hash tag `{<tag>}` (`<tag>`: the first 9 bytes of
/// SHA-256 of the binding id, base64url), so a job's commands for one target stay on one Redis Cluster slot; the
/// retry queue is spread over `RedisRetryQueue.shardCount` shards, each under its own hash tag `{retry:<shard>}`
/// (one slot per shard: its claim script touches the shard's index and entries together), so on a Redis Cluster
/// the retries spread over the masters; each partition's mark has a slot of its own.
///
/// Ids come from job producers. A binding's keys end in `<digest>`: the first 16 bytes of SHA-256 of the binding id
/// and the key's own id, each written `<length in UTF-8 bytes>:<id>` (so no pair of ids reads as another), base64url.
/// Every such key is 42 bytes whatever the ids' lengths, and no id can reach into another's key.
///
/// | key | type | value | expiry |
/// |---|---|---|---|
/// | `push:{<tag>}d<digest of the dedupe identity>` | string | id of the job that claimed the window | the kind's dedupe window |
/// | `push:{r:<shard>}<slice ms>:<slice>` | hash | field `<record digest>` (16 bytes): the final outcome as an `OutcomeRecord` (~30 bytes when delivered); see `RecordBuckets` | `PUSH_IDEMPOTENCY_TTL_S` after the slice ends |
/// | `push:{<tag>}c<digest of <n>:<userId>:<key>>` | string | `<createdAt>:<cancel job id>` of the cancel that stops the user's calls with that key | `PUSH_IDEMPOTENCY_TTL_S` |
/// | `push:{mark:<n>:<group>:<n>:<topic>:<partition>}` | hash | `f`: the fence of the partition's last owner, `o`: the highest offset marked (`PartitionMark`) | — |
/// | `push:{retry:<shard>}:due` | sorted set | retry entry ids, score = due time or lease end (ms, Redis's clock) | — |
/// | `push:{retry:<shard>}:fence` | counter | written before a `WAIT` that confirms an entry found, not written, on this connection | — |
/// | `push:{retry:<shard>}:entry:<entry id>` | hash | job bytes, binding, attempts, last error | deleted when done |
/// | `push:{retry:<shard>}:damaged:<entry id>` | hash | a retry record that no longer read as one, kept for the operator | — |

public enum RedisKeys {
    public static let prefix = "push"

    public static func dedupe(bindingId: String, identity: String) -> String { dedupeKey(bindingId: bindingId, identity: identity).text }

    public static func cancellation(bindingId: String, userId: String, key: String) -> String {
        HashedKey(bindingId: bindingId, kind: "c", id: "\(userId.utf8.count):\(userId):\(key)").text
    }

    public static func mark(_ partition: MarkedPartition) -> String {
        "\(prefix):{mark:\(partition.group.utf8.count):\(partition.group):\(partition.topic.utf8.count):\(partition.topic):\(partition.partition)}"
    }

    /// The field that names a (job, binding) record in its `RecordBuckets` hash: the first 16 bytes of SHA-256 of the
    /// binding id and the job id, each length-prefixed.
    static func recordDigest(bindingId: String, jobId: String) -> [UInt8] {
        HashedKey.withDigest(bindingId: bindingId, id: jobId) { Array($0[0..<16]) }
    }

    /// `push:{r:<shard>}<slice length ms>:<slice>`: one hash of idempotency records (`RecordBuckets`).
    struct RecordBucketKey: CommandKey, Hashable, Sendable {
        let bytes: [UInt8]

        init(shard: Int, sliceLength: Int64, slice: Int64) {
            var bytes: [UInt8] = []
            bytes.reserveCapacity(48)
            bytes.append(contentsOf: prefix.utf8)
            bytes.append(contentsOf: ":{r:".utf8)
            RedisCommand.appendDecimal(shard, to: &bytes)
            bytes.append(UInt8(ascii: "}"))
            RedisCommand.appendDecimal(Int(sliceLength), to: &bytes)
            bytes.append(UInt8(ascii: ":"))
            RedisCommand.appendDecimal(Int(slice), to: &bytes)
            self.bytes = bytes
        }

        var text: String { String(decoding: bytes, as: UTF8.self) }

        var byteCount: Int { bytes.count }

        func write(to bytes: inout [UInt8]) { bytes.append(contentsOf: self.bytes) }
    }

    static func dedupeKey(bindingId: String, identity: String) -> HashedKey { HashedKey(bindingId: bindingId, kind: "d", id: identity) }

    /// `push:{<tag>}<kind><digest>`: the fixed-size key of one id of one binding, written straight into a command.
    struct HashedKey: CommandKey {
        let bytes: [UInt8]

        init(bindingId: String, kind: Unicode.Scalar, id: String) {
            var input = Self.lengthPrefixed(bindingId, reservingFor: id)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(42)
            bytes.append(contentsOf: prefix.utf8)
            bytes.append(contentsOf: ":{".utf8)
            Digest.withSHA256(input) { tag in Base64URL.append(UnsafeBufferPointer(rebasing: tag[0..<9]), to: &bytes) }
            bytes.append(UInt8(ascii: "}"))
            bytes.append(UInt8(truncatingIfNeeded: kind.value))
            Self.appendLengthPrefixed(id, to: &input)
            Digest.withSHA256(input) { digest in Base64URL.append(UnsafeBufferPointer(rebasing: digest[0..<16]), to: &bytes) }
            self.bytes = bytes
        }

        var text: String { String(decoding: bytes, as: UTF8.self) }

        var byteCount: Int { bytes.count }

        func write(to bytes: inout [UInt8]) { bytes.append(contentsOf: self.bytes) }

        /// `body` given the key's digest: the SHA-256 of the length-prefixed binding id followed by the length-prefixed
        /// id (its hash tag is the SHA-256 of the length-prefixed binding id alone), in a buffer on the stack.
        static func withDigest<Result>(bindingId: String, id: String, _ body: (UnsafeBufferPointer<UInt8>) -> Result) -> Result {
            var input = lengthPrefixed(bindingId, reservingFor: id)
            appendLengthPrefixed(id, to: &input)
            return Digest.withSHA256(input, body)
        }

        private static func lengthPrefixed(_ bindingId: String, reservingFor id: String) -> [UInt8] {
            var input: [UInt8] = []
            input.reserveCapacity(bindingId.utf8.count + id.utf8.count + 24)
            appendLengthPrefixed(bindingId, to: &input)
            return input
        }

        private static func appendLengthPrefixed(_ id: String, to bytes: inout [UInt8]) {
            bytes.append(contentsOf: String(id.utf8.count).utf8)
            bytes.append(UInt8(ascii: ":"))
            bytes.append(contentsOf: id.utf8)
        }
    }

    /// A retry entry's key, written straight into a command's bytes: a job's checks name one per target.
    struct RetryEntryKey: CommandKey {
        /// The entry id (`RetryEntry.id`) as bytes.
        let id: [UInt8]
        let shard: Int

        var byteCount: Int { prefix.utf8.count + 1 + retryTag(shard: shard).utf8.count + 7 + id.count }

        func write(to bytes: inout [UInt8]) {
            bytes.append(contentsOf: prefix.utf8)
            bytes.append(UInt8(ascii: ":"))
            bytes.append(contentsOf: retryTag(shard: shard).utf8)
            bytes.append(contentsOf: ":entry:".utf8)
            bytes.append(contentsOf: id)
        }
    }

    /// A shard of the retry queue.
    public static func retryTag(shard: Int) -> String { "{retry:\(shard)}" }

    public static func retryIndex(shard: Int) -> String { "\(prefix):\(retryTag(shard: shard)):due" }

    public static func retryEntry(_ id: String, shard: Int) -> String { "\(prefix):\(retryTag(shard: shard)):entry:\(id)" }

    public static func damagedRetryEntry(_ id: String, shard: Int) -> String { "\(prefix):\(retryTag(shard: shard)):damaged:\(id)" }
}

/// A key that writes itself into a command (`RedisCommand.append`) without a string made first.
protocol CommandKey {
    var byteCount: Int { get }
    func write(to bytes: inout [UInt8])
}

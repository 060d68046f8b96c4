/// The key scheme. Everything about one binding shares the hash tag `{b:<bindingId>}`, so
/// a job's per-target batch stays on one Redis Cluster slot per binding; the retry queue
/// is spread over `RedisRetryQueue.shardCount` shards, each under its own hash tag `{retry:<shard>}`
/// (one slot per shard: its claim script touches the shard's index and entries together), so on a
/// Redis Cluster the retries spread over the masters.
/// Ids come from job producers: each is written as `<length>:<id>` (length in UTF-8 bytes),
/// so no id can end early and reach into another's key (binding `a}:sent:x` with job `y`
/// against binding `a` with job `x}:sent:y`).
///
/// | key | type | value | expiry |
/// |---|---|---|---|
/// | `push:{b:<n>:<bindingId>}:dd:<n>:<identity>` | string | id of the job that claimed the window | the kind's dedupe window |
/// | `push:{b:<n>:<bindingId>}:sent:<n>:<jobId>` | string | the final outcome (contract JSON) | `PUSH_IDEMPOTENCY_TTL_S` |
/// | `push:{b:<n>:<bindingId>}:cancel:<n>:<userId>:<key>` | string | `<createdAt>:<cancel job id>` of the cancel that stops the user's calls with that key | `PUSH_IDEMPOTENCY_TTL_S` |
/// | `push:{retry:<shard>}:due` | sorted set | retry entry ids, score = due time or lease end (ms, Redis's clock) | — |
/// | `push:{retry:<shard>}:entry:<entry id>` | hash | job bytes, binding, attempts, last error | deleted when done |
/// | `push:{retry:<shard>}:damaged:<entry id>` | hash | a retry record that no longer read as one, kept for the operator | — |
public enum RedisKeys {
    public static let prefix = "push"

    public static func dedupe(bindingId: String, identity: String) -> String {
        bindingKey(bindingId, "dd", identity)
    }

    public static func sent(bindingId: String, jobId: String) -> String {
        bindingKey(bindingId, "sent", jobId)
    }

    public static func cancellation(bindingId: String, userId: String, key: String) -> String {
        bindingKey(bindingId, "cancel", userId, suffix: key)
    }

    /// `push:{b:<n>:<bindingId>}:<kind>:<n>:<id>[:<suffix>]`.
    private static func bindingKey(_ bindingId: String, _ kind: String, _ id: String, suffix: String? = nil) -> String {
        let key = BindingKey(bindingId: bindingId, kind: kind, id: id, suffix: suffix)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(key.byteCount)
        key.write(to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A key of one binding, written straight into a command's bytes: two are built for every job.
    struct BindingKey: CommandKey {
        let bindingId: String
        let kind: String
        let id: String
        var suffix: String? = nil

        var byteCount: Int {
            prefix.utf8.count + 4 + Self.lengthPrefixedCount(bindingId) + 2 + kind.utf8.count + 1 + Self.lengthPrefixedCount(id)
                + (suffix.map { 1 + $0.utf8.count } ?? 0)
        }

        func write(to bytes: inout [UInt8]) {
            bytes.append(contentsOf: prefix.utf8)
            bytes.append(contentsOf: ":{b:".utf8)
            Self.writeLengthPrefixed(bindingId, to: &bytes)
            bytes.append(contentsOf: "}:".utf8)
            bytes.append(contentsOf: kind.utf8)
            bytes.append(UInt8(ascii: ":"))
            Self.writeLengthPrefixed(id, to: &bytes)
            if let suffix {
                bytes.append(UInt8(ascii: ":"))
                bytes.append(contentsOf: suffix.utf8)
            }
        }

        private static func lengthPrefixedCount(_ id: String) -> Int { String(id.utf8.count).utf8.count + 1 + id.utf8.count }

        private static func writeLengthPrefixed(_ id: String, to bytes: inout [UInt8]) {
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

    static func sentKey(bindingId: String, jobId: String) -> BindingKey { BindingKey(bindingId: bindingId, kind: "sent", id: jobId) }

    static func dedupeKey(bindingId: String, identity: String) -> BindingKey { BindingKey(bindingId: bindingId, kind: "dd", id: identity) }

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

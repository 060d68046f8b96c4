/// The key scheme. Everything about one binding shares the hash tag `{b:<bindingId>}`, so
/// a job's per-target batch stays on one Redis Cluster slot per binding; the retry queue
/// is spread over `RedisRetryQueue.shardCount` shards, each under its own hash tag `{retry:<shard>}`
/// (one slot per shard: its claim script touches the shard's index and entries together), so on a
/// Redis Cluster the retries spread over the masters. The single queue of earlier versions,
/// under `{retry}`, is still drained.
/// Ids come from job producers: each is written as `<length>:<id>` (length in UTF-8 bytes),
/// so no id can end early and reach into another's key (binding `a}:sent:x` with job `y`
/// against binding `a` with job `x}:sent:y`).
///
/// | key | type | value | expiry |
/// |---|---|---|---|
/// | `push:{b:<n>:<bindingId>}:dd:<n>:<identity>` | string | id of the job that claimed the window | the kind's dedupe window |
/// | `push:{b:<n>:<bindingId>}:sent:<n>:<jobId>` | string | the final outcome (contract JSON) | `PUSH_IDEMPOTENCY_TTL_S` |
/// | `push:{b:<n>:<bindingId>}:cancel:<n>:<userId>:<key>` | string | `<createdAt>:<cancel job id>` of the cancel that stops the user's calls with that key | `PUSH_IDEMPOTENCY_TTL_S` |
/// | `push:{retry:<shard>}:due` | sorted set | retry entry ids, score = due time (ms) or lease end | — |
/// | `push:{retry:<shard>}:entry:<entry id>` | hash | job bytes, binding, attempts, last error | deleted when done |
/// | `push:{retry:<shard>}:damaged:<entry id>` | hash | a retry record that no longer read as one, kept for the operator | — |
/// | `push:{retry}:due`, `push:{retry}:entry:<entry id>` | | the queue of earlier versions: claimed and completed, never added to | |
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

    /// `push:{b:<n>:<bindingId>}:<kind>:<n>:<id>[:<suffix>]`, written into one string (a key is built for every job).
    private static func bindingKey(_ bindingId: String, _ kind: String, _ id: String, suffix: String? = nil) -> String {
        var key = String()
        key.reserveCapacity(prefix.utf8.count + bindingId.utf8.count + id.utf8.count + (suffix?.utf8.count ?? 0) + 32)
        key += prefix
        key += ":{b:"
        appendLengthPrefixed(bindingId, to: &key)
        key += "}:"
        key += kind
        key += ":"
        appendLengthPrefixed(id, to: &key)
        if let suffix {
            key += ":"
            key += suffix
        }
        return key
    }

    private static func appendLengthPrefixed(_ id: String, to key: inout String) {
        key += String(id.utf8.count)
        key += ":"
        key += id
    }

    /// A shard of the retry queue; nil: the single queue of earlier versions.
    public static func retryTag(shard: Int?) -> String { shard.map { "{retry:\($0)}" } ?? "{retry}" }

    public static func retryIndex(shard: Int?) -> String { "\(prefix):\(retryTag(shard: shard)):due" }

    public static func retryEntry(_ id: String, shard: Int?) -> String { "\(prefix):\(retryTag(shard: shard)):entry:\(id)" }

    public static func damagedRetryEntry(_ id: String, shard: Int?) -> String { "\(prefix):\(retryTag(shard: shard)):damaged:\(id)" }
}

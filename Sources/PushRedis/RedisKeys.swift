/// The key scheme. Everything about one binding shares the hash tag `{b:<bindingId>}`, so
/// a job's per-target batch stays on one Redis Cluster slot per binding; the retry queue
/// lives under `{retry}` (one slot: its claim script touches the index and the entries).
///
/// | key | type | value | expiry |
/// |---|---|---|---|
/// | `push:{b:<bindingId>}:dd:<identity>` | string | id of the job that claimed the window | the kind's dedupe window |
/// | `push:{b:<bindingId>}:sent:<jobId>` | string | the final outcome (contract JSON) | `PUSH_IDEMPOTENCY_TTL_S` |
/// | `push:{retry}:due` | sorted set | retry entry ids, score = due time (ms) or lease end | — |
/// | `push:{retry}:entry:<jobId>/<bindingId>` | hash | job bytes, binding, attempts, last error | deleted when done |
public enum RedisKeys {
    public static let prefix = "push"

    public static func dedupe(bindingId: String, identity: String) -> String {
        "\(prefix):{b:\(bindingId)}:dd:\(identity)"
    }

    public static func sent(bindingId: String, jobId: String) -> String {
        "\(prefix):{b:\(bindingId)}:sent:\(jobId)"
    }

    public static let retryIndex = "\(prefix):{retry}:due"

    public static func retryEntry(_ id: String) -> String { "\(prefix):{retry}:entry:\(id)" }
}

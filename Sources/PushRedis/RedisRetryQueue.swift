import Logging
import PushCore

/// The retry queue: a sorted set of entry ids scored by due time, and one hash per entry.
/// Claiming moves an entry's score to the end of its lease, atomically (Lua), so two
/// schedulers never hold the same entry, and an entry whose holder died is due again
/// when the lease ends. A record that no longer reads as an entry is moved aside to
/// `push:{retry}:damaged:<id>` (kept for the operator, not retried) and logged as an error.
public final class RedisRetryQueue: RetryQueue {
    private let client: RedisClient
    private let logger: Logger

    static let claimScript = RedisScript("""
        local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
        for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[3], id) end
        return ids
        """)

    public init(client: RedisClient, logger: Logger = Logger(label: "push-worker.retry-queue")) {
        self.client = client
        self.logger = logger
    }

    public func schedule(_ entry: RetryEntry, dueAt: Int64) async throws {
        var fields: [[UInt8]] = [Array("HSET".utf8), Array(RedisKeys.retryEntry(entry.id).utf8)]
        func field(_ name: String, _ value: [UInt8]) { fields.append(Array(name.utf8)); fields.append(value) }
        field("job", entry.jobBytes)
        field("key", entry.kafkaKey ?? [])
        field("hasKey", Array((entry.kafkaKey == nil ? "0" : "1").utf8))
        field("fallbackCreatedAt", Array(String(entry.fallbackCreatedAt).utf8))
        field("binding", Array(entry.bindingId.utf8))
        field("attempts", Array(String(entry.attempts).utf8))
        field("reason", Array(entry.lastReason.utf8))
        field("httpStatus", Array((entry.lastHTTPStatus.map(String.init) ?? "").utf8))
        try await transaction([RedisCommand(fields), RedisCommand("ZADD", RedisKeys.retryIndex, String(dueAt), entry.id)])
    }

    public func claimDue(now: Int64, limit: Int, lease: Duration) async throws -> [RetryEntry] {
        guard limit > 0 else { return [] }
        let claimed = try await client.evaluate(Self.claimScript, keys: [RedisKeys.retryIndex], arguments: [
            Array(String(now).utf8), Array(String(limit).utf8), Array(String(now.adding(saturating: lease.milliseconds)).utf8),
        ])
        guard case .array(let values) = claimed else { return [] }
        let ids = values.compactMap(\.string)
        guard !ids.isEmpty else { return [] }
        let replies = try await client.pipeline(ids.map { RedisCommand("HGETALL", RedisKeys.retryEntry($0)) })
        var entries: [RetryEntry] = []
        for (id, reply) in zip(ids, replies) {
            if let entry = Self.entry(id: id, from: reply) {
                entries.append(entry)
            } else {
                try await moveAside(id, reply: reply)
            }
        }
        return entries
    }

    /// Takes a damaged record out of the queue without losing it: the hash goes to the damaged key, the id leaves the index.
    private func moveAside(_ id: String, reply: RedisValue) async throws {
        let exists = if case .array(let fields) = reply { !fields.isEmpty } else { false }
        var commands = [RedisCommand("ZREM", RedisKeys.retryIndex, id)]
        if exists { commands.insert(RedisCommand("RENAME", RedisKeys.retryEntry(id), RedisKeys.damagedRetryEntry(id)), at: 0) }
        try await transaction(commands)
        logger.error("damaged retry record taken out of the queue: its delivery is not retried", metadata: [
            "entry": "\(id)", "keptAt": "\(exists ? RedisKeys.damagedRetryEntry(id) : "nowhere: the index named no record")",
        ])
    }

    public func complete(_ id: String) async throws {
        try await transaction([RedisCommand("DEL", RedisKeys.retryEntry(id)), RedisCommand("ZREM", RedisKeys.retryIndex, id)])
    }

    public func count() async throws -> Int {
        Int(try await client.command(RedisCommand("ZCARD", RedisKeys.retryIndex)).integer ?? 0)
    }

    private func transaction(_ commands: [RedisCommand]) async throws {
        let replies = try await client.pipeline([RedisCommand("MULTI")] + commands + [RedisCommand("EXEC")])
        guard case .array(let results)? = replies.last else {
            throw RedisError.reply("transaction aborted: \(replies.last.map { "\($0)" } ?? "no reply")")
        }
        if case .error(let message)? = results.first(where: { if case .error = $0 { true } else { false } }) {
            throw RedisError.reply(message)
        }
    }

    /// Attempt counts above this are a damaged record, not a real history (`PUSH_MAX_ATTEMPTS` is far lower).
    static let maximumRecordedAttempts = 1_000_000

    static func entry(id: String, from reply: RedisValue) -> RetryEntry? {
        guard case .array(let flat) = reply, !flat.isEmpty, flat.count.isMultiple(of: 2) else { return nil }
        var fields: [String: [UInt8]] = [:]
        for index in stride(from: 0, to: flat.count, by: 2) {
            guard let name = flat[index].string, case .bulk(let value) = flat[index + 1] else { continue }
            fields[name] = value
        }
        func text(_ name: String) -> String? { fields[name].map { String(decoding: $0, as: UTF8.self) } }
        guard let job = fields["job"], let binding = text("binding"), let attempts = text("attempts").flatMap(Int.init), (0...Self.maximumRecordedAttempts).contains(attempts),
              let fallback = text("fallbackCreatedAt").flatMap(Int64.init)
        else { return nil }
        return RetryEntry(id: id, jobBytes: job, kafkaKey: text("hasKey") == "1" ? fields["key"] : nil,
                          fallbackCreatedAt: fallback, bindingId: binding, attempts: attempts,
                          lastReason: text("reason") ?? "", lastHTTPStatus: text("httpStatus").flatMap(Int.init))
    }
}

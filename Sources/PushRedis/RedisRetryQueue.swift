import Logging
import PushCore
import Synchronization

/// The retry queue: `shardCount` shards, each a sorted set of entry ids scored by due time and
/// one hash per entry, under the shard's hash tag (an entry's shard follows from its id). Claiming
/// moves an entry's score to the end of its lease, atomically (Lua, per shard), so two schedulers
/// never hold the same entry, and an entry whose holder died is due again when the lease ends.
/// A claim spreads its limit over the shards, starting one shard further each time, then gives
/// what is left to the shards it did not reach and those that had more (four round trips at most). A record that no longer reads as an entry is moved
/// aside to `push:{retry:<shard>}:damaged:<id>` (kept for the operator, not retried) and logged as an error.
///
/// The single queue of earlier versions (`push:{retry}:…`) is claimed from as one more shard and
/// never added to: an entry claimed there and scheduled again moves to its shard.
public final class RedisRetryQueue: RetryQueue {
    /// On a Redis Cluster the shards spread over the masters. Fixed: an entry is found again by its
    /// id, in the shard the id names, so the count cannot change under a running queue.
    public static let shardCount = 16
    /// The shards claimed from: every shard, then the queue of earlier versions (nil).
    static let claimedShards: [Int?] = Array(0..<shardCount) + [nil]
    /// Round trips a claim may add to reach its limit.
    static let maximumExtraPasses = 3

    private let client: RedisClient
    private let logger: Logger
    private let nextShard = Atomic<Int>(0)
    /// Entries this replica claimed from the queue of earlier versions, to take out of it when they move or end.
    private let claimedFromEarlierQueue = Mutex<Set<String>>([])

    static let claimScript = RedisScript("""
        local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
        for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[3], id) end
        return ids
        """)

    public init(client: RedisClient, logger: Logger = Logger(label: "push-worker.retry-queue")) {
        self.client = client
        self.logger = logger
    }

    /// The shard an entry id belongs to.
    public static func shard(of id: String) -> Int { shard(ofBytes: Array(id.utf8)) }

    static func shard(ofBytes id: [UInt8]) -> Int { Int(RedisKeySlot.crc16(id[...])) % shardCount }

    public func schedule(_ entry: RetryEntry, dueAt: Int64) async throws {
        let shard = Self.shard(of: entry.id)
        var fields: [[UInt8]] = [Array("HSET".utf8), Array(RedisKeys.retryEntry(entry.id, shard: shard).utf8)]
        func field(_ name: String, _ value: [UInt8]) { fields.append(Array(name.utf8)); fields.append(value) }
        field("job", entry.jobBytes)
        field("key", entry.kafkaKey ?? [])
        field("hasKey", Array((entry.kafkaKey == nil ? "0" : "1").utf8))
        field("fallbackCreatedAt", Array(String(entry.fallbackCreatedAt).utf8))
        field("binding", Array(entry.bindingId.utf8))
        field("attempts", Array(String(entry.attempts).utf8))
        field("reason", Array(entry.lastReason.utf8))
        field("httpStatus", Array((entry.lastHTTPStatus.map(String.init) ?? "").utf8))
        var blocks = [[RedisCommand(fields), RedisCommand("ZADD", RedisKeys.retryIndex(shard: shard), String(dueAt), entry.id)]]
        let wasInEarlierQueue = claimedFromEarlierQueue.withLock { $0.contains(entry.id) }
        if wasInEarlierQueue { blocks.append(Self.removal(entry.id, shard: nil)) }
        try await transactions(blocks)
        if wasInEarlierQueue { _ = claimedFromEarlierQueue.withLock { $0.remove(entry.id) } }
    }

    public func claimDue(now: Int64, limit: Int, lease: Duration) async throws -> [RetryEntry] {
        guard limit > 0 else { return [] }
        let leaseEnd = now.adding(saturating: lease.milliseconds)
        let shards = Self.claimedShards
        let first = nextShard.add(1, ordering: .relaxed).oldValue % shards.count
        var quotas = [Int](repeating: limit / shards.count, count: shards.count)
        for offset in 0..<(limit % shards.count) { quotas[(first + offset) % shards.count] += 1 }
        var claimed = try await claim(quotas, now: now, leaseEnd: leaseEnd)
        var asked = quotas.map { $0 > 0 }
        var lastQuotas = quotas
        var lastClaimed = claimed
        // The rest of the limit goes to the shards not asked yet (a limit below the shard count) and to
        // those that filled their quota (they may hold more).
        let rotation = shards.indices.map { (first + $0) % shards.count }
        for _ in 0..<Self.maximumExtraPasses {
            let total = claimed.reduce(0) { $0 + $1.count }
            let candidates = rotation.filter { !asked[$0] || (lastQuotas[$0] > 0 && lastClaimed[$0].count == lastQuotas[$0]) }
            guard total < limit, !candidates.isEmpty else { break }
            var extra = [Int](repeating: 0, count: shards.count)
            let left = limit - total
            for (position, index) in candidates.enumerated() {
                extra[index] = left / candidates.count + (position < left % candidates.count ? 1 : 0)
                if extra[index] > 0 { asked[index] = true }
            }
            let more = try await claim(extra, now: now, leaseEnd: leaseEnd)
            for index in shards.indices { claimed[index] += more[index] }
            lastQuotas = extra
            lastClaimed = more
        }
        var entries: [RetryEntry] = []
        for (index, ids) in claimed.enumerated() where !ids.isEmpty {
            entries += try await read(ids, shard: shards[index])
        }
        return entries
    }

    /// One round trip per node: each shard with a quota claims up to it. Ids per shard, in shard order.
    private func claim(_ quotas: [Int], now: Int64, leaseEnd: Int64) async throws -> [[String]] {
        let shards = Self.claimedShards
        var asked: [Int] = []
        for index in shards.indices where quotas[index] > 0 { asked.append(index) }
        let replies = try await client.evaluateAll(Self.claimScript, calls: asked.map { index in
            (keys: [RedisKeys.retryIndex(shard: shards[index])],
             arguments: [Array(String(now).utf8), Array(String(quotas[index]).utf8), Array(String(leaseEnd).utf8)])
        })
        var claimed = [[String]](repeating: [], count: shards.count)
        for (index, reply) in zip(asked, replies) {
            if case .error(let message) = reply { throw RedisError.reply(message) }
            guard case .array(let values) = reply else { continue }
            claimed[index] = values.compactMap(\.string)
        }
        if !claimed[shards.count - 1].isEmpty {
            let earlier = claimed[shards.count - 1]
            claimedFromEarlierQueue.withLock { $0.formUnion(earlier) }
        }
        return claimed
    }

    private func read(_ ids: [String], shard: Int?) async throws -> [RetryEntry] {
        let replies = try await client.pipeline(ids.map { RedisCommand("HGETALL", RedisKeys.retryEntry($0, shard: shard)) })
        var entries: [RetryEntry] = []
        for (id, reply) in zip(ids, replies) {
            if let entry = Self.entry(id: id, from: reply) {
                entries.append(entry)
            } else {
                try await moveAside(id, shard: shard, reply: reply)
            }
        }
        return entries
    }

    /// Takes a damaged record out of the queue without losing it: the hash goes to the damaged key, the id leaves the index.
    private func moveAside(_ id: String, shard: Int?, reply: RedisValue) async throws {
        let exists = if case .array(let fields) = reply { !fields.isEmpty } else { false }
        var commands = [RedisCommand("ZREM", RedisKeys.retryIndex(shard: shard), id)]
        let damaged = RedisKeys.damagedRetryEntry(id, shard: shard ?? Self.shard(of: id))
        if exists, shard != nil { commands.insert(RedisCommand("RENAME", RedisKeys.retryEntry(id, shard: shard), damaged), at: 0) }
        if exists, shard == nil {
            // Across hash tags RENAME is refused on a cluster: the earlier queue's record is copied field by field.
            if case .array(let flat) = reply {
                try await transactions([[RedisCommand([Array("HSET".utf8), Array(damaged.utf8)] + flat.map { $0.bytes })]])
            }
            commands.insert(RedisCommand("DEL", RedisKeys.retryEntry(id, shard: nil)), at: 0)
        }
        try await transactions([commands])
        _ = claimedFromEarlierQueue.withLock { $0.remove(id) }
        logger.error("damaged retry record taken out of the queue: its delivery is not retried", metadata: [
            "entry": "\(id)", "keptAt": "\(exists ? damaged : "nowhere: the index named no record")",
        ])
    }

    public func complete(_ id: String) async throws {
        let wasInEarlierQueue = claimedFromEarlierQueue.withLock { $0.contains(id) }
        var blocks = [Self.removal(id, shard: Self.shard(of: id))]
        if wasInEarlierQueue { blocks.append(Self.removal(id, shard: nil)) }
        try await transactions(blocks)
        if wasInEarlierQueue { _ = claimedFromEarlierQueue.withLock { $0.remove(id) } }
    }

    private static func removal(_ id: String, shard: Int?) -> [RedisCommand] {
        [RedisCommand("DEL", RedisKeys.retryEntry(id, shard: shard)), RedisCommand("ZREM", RedisKeys.retryIndex(shard: shard), id)]
    }

    public func count() async throws -> Int {
        let replies = try await client.pipeline(Self.claimedShards.map { RedisCommand("ZCARD", RedisKeys.retryIndex(shard: $0)) })
        return replies.reduce(0) { $0 + Int($1.integer ?? 0) }
    }

    /// Entries per shard (the earlier queue last), for operators and tests.
    public func countPerShard() async throws -> [Int] {
        let replies = try await client.pipeline(Self.claimedShards.map { RedisCommand("ZCARD", RedisKeys.retryIndex(shard: $0)) })
        return replies.map { Int($0.integer ?? 0) }
    }

    /// Each block runs as one MULTI…EXEC (its keys share a hash tag); the blocks go out in one pipeline.
    private func transactions(_ blocks: [[RedisCommand]]) async throws {
        var commands: [RedisCommand] = []
        for block in blocks { commands += [RedisCommand("MULTI")] + block + [RedisCommand("EXEC")] }
        let replies = try await client.pipeline(commands)
        var offset = 0
        for block in blocks {
            offset += block.count + 2
            guard case .array(let results) = replies[offset - 1] else {
                throw RedisError.reply("transaction aborted: \(replies[offset - 1])")
            }
            if case .error(let message)? = results.first(where: { if case .error = $0 { true } else { false } }) {
                throw RedisError.reply(message)
            }
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

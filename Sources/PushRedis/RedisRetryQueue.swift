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
/// Every time in the index is Redis's (`TIME` inside the scripts; Redis replicates a script's effects, not the
/// script, so the replicas store the same scores): due times are kept as the caller's delay from Redis's now,
/// leases end at Redis's now plus the lease, and a lease is renewed only while the entry still carries the end
/// its holder set. A replica's clock, however skewed, neither makes it take a leased entry nor makes an entry
/// due early or late.
///
/// A hand-off (`schedule`) returns once a replica of the entry's node has the write where the node has replicas
/// (`RedisClient.evaluateReplicated`): after it the job's offset may be committed, and a failover must not lose it.
/// A hand-off no replica acknowledged in time throws `ReplicationShortfall` (the entry is on the node only); `confirm`
/// says later whether it is there and durable, without writing it again over a claim that may hold it by then.
public final class RedisRetryQueue: RetryQueue {
    /// On a Redis Cluster the shards spread over the masters. Fixed: an entry is found again by its
    /// id, in the shard the id names, so the count cannot change under a running queue.
    public static let shardCount = 16
    static let shards = Array(0..<shardCount)
    /// Round trips a claim may add to reach its limit.
    static let maximumExtraPasses = 3
    /// The longest delay a hand-off keeps (a due time further away is a caller's clock gone wrong): 30 days.
    static let maximumDelayMilliseconds: Int64 = 30 * 86_400_000

    private let client: RedisClient
    private let logger: Logger
    private let clock: @Sendable () -> Int64
    private let replicationTimeout: Duration
    private let nextShard = Atomic<Int>(0)

    /// Redis's now in milliseconds, inside a script.
    private static let serverNow = """
        local time = redis.call('TIME')
        local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
        """

    /// KEYS: the index. ARGV: limit, lease (ms). Returns {lease end, ids}.
    static let claimScript = RedisScript(
        serverNow + """

            local leaseEnd = string.format('%d', now + tonumber(ARGV[2]))
            local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', string.format('%d', now), 'LIMIT', 0, tonumber(ARGV[1]))
            for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], leaseEnd, id) end
            return {leaseEnd, ids}
            """)

    /// KEYS: the index. ARGV: lease (ms), then (id, lease end held) pairs. Returns {lease end, {1 renewed | 0 lost, ...}}.
    static let renewScript = RedisScript(
        serverNow + """

            local leaseEnd = string.format('%d', now + tonumber(ARGV[1]))
            local renewed = {}
            for index = 2, #ARGV, 2 do
                local score = redis.call('ZSCORE', KEYS[1], ARGV[index])
                if score and tonumber(score) == tonumber(ARGV[index + 1]) then
                    redis.call('ZADD', KEYS[1], leaseEnd, ARGV[index])
                    renewed[#renewed + 1] = 1
                else
                    renewed[#renewed + 1] = 0
                end
            end
            return {leaseEnd, renewed}
            """)

    /// KEYS: the entry's hash, its shard's index. ARGV: delay (ms), id, then the hash's (field, value) pairs.
    static let scheduleScript = RedisScript(
        serverNow + """

            redis.call('HSET', KEYS[1], unpack(ARGV, 3))
            redis.call('ZADD', KEYS[2], string.format('%d', now + tonumber(ARGV[1])), ARGV[2])
            return 1
            """)

    /// - Parameters:
    ///   - clock: this replica's clock (ms), only to turn a hand-off's due time into a delay.
    ///   - replicationTimeout: how long a hand-off waits for a replica of its node to acknowledge it.
    public init(
        client: RedisClient, logger: Logger = Logger(label: "push-worker.retry-queue"),
        clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds, replicationTimeout: Duration = .seconds(1)
    ) {
        self.client = client
        self.logger = logger
        self.clock = clock
        self.replicationTimeout = replicationTimeout
    }

    /// The shard an entry id belongs to.
    public static func shard(of id: String) -> Int { shard(ofBytes: Array(id.utf8)) }

    static func shard(ofBytes id: [UInt8]) -> Int { Int(RedisKeySlot.crc16(id[...])) % shardCount }

    public func schedule(_ entry: RetryEntry, dueAt: Int64) async throws {
        let shard = Self.shard(of: entry.id)
        let delay = min(max(0, dueAt.subtracting(saturating: clock())), Self.maximumDelayMilliseconds)
        var arguments: [[UInt8]] = [Array(String(delay).utf8), Array(entry.id.utf8)]
        func field(_ name: String, _ value: [UInt8]) {
            arguments.append(Array(name.utf8))
            arguments.append(value)
        }
        field("job", entry.jobBytes)
        field("key", entry.kafkaKey ?? [])
        field("hasKey", Array((entry.kafkaKey == nil ? "0" : "1").utf8))
        field("fallbackCreatedAt", Array(String(entry.fallbackCreatedAt).utf8))
        field("binding", Array(entry.bindingId.utf8))
        field("attempts", Array(String(entry.attempts).utf8))
        field("reason", Array(entry.lastReason.utf8))
        field("httpStatus", Array((entry.lastHTTPStatus.map(String.init) ?? "").utf8))
        let reply = try await client.evaluateReplicated(
            Self.scheduleScript,
            keys: [RedisKeys.retryEntry(entry.id, shard: shard), RedisKeys.retryIndex(shard: shard)],
            arguments: arguments, timeout: replicationTimeout)
        if let shortfall = reply.shortfall { throw shortfall }
    }

    /// KEYS: the entry's hash, its shard's fence. Returns whether the entry exists, after a write of the fence: `WAIT`
    /// confirms the writes of its own connection only, and the entry may have been written on another (another
    /// replica's hand-off before a redelivery), so the fence's write, which follows the entry's in the node's
    /// replication stream, is what the replica acknowledges.
    static let confirmScript = RedisScript(
        """
        local exists = redis.call('EXISTS', KEYS[1])
        redis.call('INCR', KEYS[2])
        return exists
        """)

    /// A shard's fence: a counter `confirm` writes to, under the shard's hash tag so it lives on the entries' node.
    static func fence(shard: Int) -> String { "push:\(RedisKeys.retryTag(shard: shard)):fence" }

    public func confirm(_ id: String) async throws -> Bool {
        try await Self.confirm(id, client: client, timeout: replicationTimeout)
    }

    /// `confirm` through `client`, for a store that sees an entry on a redelivery (`RedisDeliveryStore.prepare`).
    static func confirm(_ id: String, client: RedisClient, timeout: Duration) async throws -> Bool {
        let shard = shard(of: id)
        let reply = try await client.evaluateReplicated(
            confirmScript, keys: [RedisKeys.retryEntry(id, shard: shard), fence(shard: shard)], arguments: [], timeout: timeout)
        if let shortfall = reply.shortfall { throw shortfall }
        return (reply.value.integer ?? 0) > 0
    }

    public func claimDue(limit: Int, lease: Duration) async throws -> [RetryClaim] {
        guard limit > 0 else { return [] }
        let shards = Self.shards
        let first = nextShard.add(1, ordering: .relaxed).oldValue % shards.count
        var quotas = [Int](repeating: limit / shards.count, count: shards.count)
        for offset in 0..<(limit % shards.count) { quotas[(first + offset) % shards.count] += 1 }
        var claimed = try await claim(quotas, lease: lease)
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
            let more = try await claim(extra, lease: lease)
            for index in shards.indices { claimed[index] += more[index] }
            lastQuotas = extra
            lastClaimed = more
        }
        var claims: [RetryClaim] = []
        for (index, leases) in claimed.enumerated() where !leases.isEmpty {
            let ends = Dictionary(leases.map { ($0.id, $0.end) }) { _, later in later }
            // A pass that took longer than a short lease may claim an entry a second time: it is one claim, the latest lease.
            var seen = Set<String>()
            let ids = leases.map(\.id).filter { seen.insert($0).inserted }
            claims += try await read(ids, shard: shards[index]).map { entry in
                RetryClaim(entry: entry, lease: RetryLease(id: entry.id, end: ends[entry.id]!))
            }
        }
        return claims
    }

    /// One round trip per node: each shard with a quota claims up to it. Leases per shard, in shard order.
    private func claim(_ quotas: [Int], lease: Duration) async throws -> [[RetryLease]] {
        let shards = Self.shards
        var asked: [Int] = []
        for index in shards.indices where quotas[index] > 0 { asked.append(index) }
        let replies = try await client.evaluateAll(
            Self.claimScript,
            calls: asked.map { index in
                (
                    keys: [RedisKeys.retryIndex(shard: shards[index])],
                    arguments: [Array(String(quotas[index]).utf8), Array(String(lease.milliseconds).utf8)]
                )
            })
        var claimed = [[RetryLease]](repeating: [], count: shards.count)
        for (index, reply) in zip(asked, replies) {
            if case .error(let message) = reply { throw RedisError.reply(message) }
            guard case .array(let parts) = reply, parts.count == 2, let end = parts[0].string.flatMap({ Int64($0) }),
                case .array(let ids) = parts[1]
            else { throw RedisError.reply("unexpected claim reply: \(reply)") }
            claimed[index] = ids.compactMap(\.string).map { RetryLease(id: $0, end: end) }
        }
        return claimed
    }

    public func renew(_ leases: [RetryLease], for lease: Duration) async throws -> [RetryLease?] {
        guard !leases.isEmpty else { return [] }
        // Per shard, the positions of its leases in the caller's list.
        var positions: [Int: [Int]] = [:]
        for (position, held) in leases.enumerated() {
            positions[Self.shard(of: held.id), default: []].append(position)
        }
        let groups = Array(positions)
        let replies = try await client.evaluateAll(
            Self.renewScript,
            calls: groups.map { shard, members in
                (
                    keys: [RedisKeys.retryIndex(shard: shard)],
                    arguments: [Array(String(lease.milliseconds).utf8)]
                        + members.flatMap { [Array(leases[$0].id.utf8), Array(String(leases[$0].end).utf8)] }
                )
            })
        var renewed = [RetryLease?](repeating: nil, count: leases.count)
        for ((_, members), reply) in zip(groups, replies) {
            if case .error(let message) = reply { throw RedisError.reply(message) }
            guard case .array(let parts) = reply, parts.count == 2, let end = parts[0].string.flatMap({ Int64($0) }),
                case .array(let flags) = parts[1], flags.count == members.count
            else { throw RedisError.reply("unexpected renewal reply: \(reply)") }
            for (position, flag) in zip(members, flags) where flag.integer == 1 {
                renewed[position] = RetryLease(id: leases[position].id, end: end)
            }
        }
        return renewed
    }

    private func read(_ ids: [String], shard: Int) async throws -> [RetryEntry] {
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
    private func moveAside(_ id: String, shard: Int, reply: RedisValue) async throws {
        let exists = if case .array(let fields) = reply { !fields.isEmpty } else { false }
        var commands = [RedisCommand("ZREM", RedisKeys.retryIndex(shard: shard), id)]
        let damaged = RedisKeys.damagedRetryEntry(id, shard: shard)
        if exists { commands.insert(RedisCommand("RENAME", RedisKeys.retryEntry(id, shard: shard), damaged), at: 0) }
        try await transactions([commands])
        logger.error(
            "damaged retry record taken out of the queue: its delivery is not retried",
            metadata: [
                "entry": "\(id)", "keptAt": "\(exists ? damaged : "nowhere: the index named no record")",
            ])
    }

    public func complete(_ id: String) async throws {
        let shard = Self.shard(of: id)
        try await transactions([
            [RedisCommand("DEL", RedisKeys.retryEntry(id, shard: shard)), RedisCommand("ZREM", RedisKeys.retryIndex(shard: shard), id)]
        ])
    }

    public func count() async throws -> Int {
        let replies = try await client.pipeline(Self.shards.map { RedisCommand("ZCARD", RedisKeys.retryIndex(shard: $0)) })
        return replies.reduce(0) { $0 + Int($1.integer ?? 0) }
    }

    /// KEYS: the index. ARGV: overdue after (ms). Returns {entries, entries due before Redis's now minus ARGV[1]}.
    /// A claimed entry is scored by the end of its lease, so it counts as overdue only once its lease has lapsed.
    static let depthScript = RedisScript(
        serverNow + """

            local overdue = redis.call('ZCOUNT', KEYS[1], '-inf', string.format('(%d', now - tonumber(ARGV[1])))
            return {redis.call('ZCARD', KEYS[1]), overdue}
            """)

    public func depth(overdueAfter: Duration) async throws -> RetryQueueDepth {
        let overdueAfter = Array(String(max(overdueAfter.milliseconds, 0)).utf8)
        let replies = try await client.evaluateAll(
            Self.depthScript, calls: Self.shards.map { (keys: [RedisKeys.retryIndex(shard: $0)], arguments: [overdueAfter]) })
        var (entries, overdue): (Int64, Int64) = (0, 0)
        for reply in replies {
            if case .error(let message) = reply { throw RedisError.reply(message) }
            guard case .array(let counts) = reply, counts.count == 2, let shardEntries = counts[0].integer,
                let shardOverdue = counts[1].integer
            else { throw RedisError.reply("unexpected depth reply: \(reply)") }
            entries = entries.adding(saturating: Int64(clamping: shardEntries))
            overdue = overdue.adding(saturating: Int64(clamping: shardOverdue))
        }
        return RetryQueueDepth(entries: Int(clamping: entries), overdue: Int(clamping: overdue))
    }

    /// Entries per shard, for operators and tests.
    public func countPerShard() async throws -> [Int] {
        let replies = try await client.pipeline(Self.shards.map { RedisCommand("ZCARD", RedisKeys.retryIndex(shard: $0)) })
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
        guard let job = fields["job"], let binding = text("binding"), let attempts = text("attempts").flatMap(Int.init),
            (0...Self.maximumRecordedAttempts).contains(attempts),
            let fallback = text("fallbackCreatedAt").flatMap(Int64.init)
        else { return nil }
        return RetryEntry(
            id: id, jobBytes: job, kafkaKey: text("hasKey") == "1" ? fields["key"] : nil,
            fallbackCreatedAt: fallback, bindingId: binding, attempts: attempts,
            lastReason: text("reason") ?? "", lastHTTPStatus: text("httpStatus").flatMap(Int.init))
    }
}

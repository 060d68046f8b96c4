import PushCore
import Synchronization

/// Dedupe windows, idempotency records and partition marks in Redis, shared by every replica.
///
/// A first delivery (`prepare(_:dedupeWindow:firstDelivery: true)`) sends one command per target when dedupe is on,
/// `SET d <jobId> NX GET PX <window>`, whose reply is the window's holder, and none when it is off; its final
/// outcome is one `HSET` of a field in a hash that many records share (`RecordBuckets`). A job whose offset may have
/// been handed out before reads, in the same round trip, each target's record (in every hash it can be in) and
/// whether its retry entry exists. The claim names the job, so the same job
/// redelivered by Kafka is not a duplicate of itself; a first delivery whose own id already holds the window (the job
/// was produced twice) reads its records in a second round trip.
public final class RedisDeliveryStore: DeliveryStore {
    /// How long this replica goes without setting a record hash's expiry again while it writes to it: a hash
    /// deleted meanwhile (by an operator, or evicted) and made again by a write gets its expiry back within this.
    /// With 1 024 hashes a slice, that is at most 17 `PEXPIRE` a second per replica, whatever its rate.
    static let expiryRefresh: Int64 = 60_000

    private let client: RedisClient
    private let buckets: RecordBuckets
    private let clock: WallClock
    private let replicationTimeout: Duration
    private let expiriesSet = Mutex(ExpiriesSet())

    /// - Parameters:
    ///   - recordRetention: how long final outcomes and cancels are kept (`PUSH_IDEMPOTENCY_TTL_S`).
    ///   - clock: wall-clock milliseconds, which place records in their slice of time.
    ///   - replicationTimeout: how long a redelivery that finds its retry entry waits for a replica to have it.
    public init(
        client: RedisClient, recordRetention: Duration, clock: @escaping WallClock = currentTimeMilliseconds,
        replicationTimeout: Duration = .seconds(1)
    ) {
        self.client = client
        buckets = RecordBuckets(retention: recordRetention)
        self.clock = clock
        self.replicationTimeout = replicationTimeout
    }

    /// A first delivery's checks are one pipeline, answered on the client's thread; what a redelivery reads after them
    /// (`redelivered`) runs on a task.
    public func prepare(
        _ job: Job, dedupeWindow: Int64, firstDelivery: Bool, completion: @escaping @Sendable (Result<[PriorState], any Error>) -> Void
    ) {
        let checks = Checks(job, dedupeWindow: dedupeWindow, readingRecords: !firstDelivery, buckets: buckets, now: clock())
        guard !checks.commands.isEmpty else { return completion(.success(Array(repeating: .fresh, count: job.targets.count))) }
        client.pipeline(checks.commands) { [self] answer in
            let states: [PriorState]
            let unread: [Int]
            do {
                (states, unread) = checks.priorStates(replies: try Self.checked(answer.get()))
            } catch {
                return completion(.failure(error))
            }
            guard unread.isEmpty, !states.contains(.inRetryQueue) else {
                Task {
                    do {
                        completion(.success(try await redelivered(job, states: states, unread: unread)))
                    } catch {
                        completion(.failure(error))
                    }
                }
                return
            }
            completion(.success(states))
        }
    }

    /// What a redelivered job's checks left to read: the records of `unread` targets, and whether the retry entries
    /// found are durable. (A function of its own: a first delivery's frame does not hold what this one needs.)
    @inline(never)
    private func redelivered(_ job: Job, states: [PriorState], unread: [Int]) async throws -> [PriorState] {
        var states = states
        if !unread.isEmpty {
            let now = clock()
            let reads = unread.map {
                [Self.recordRead(job, target: job.targets[$0], buckets: buckets, now: now), Self.retryExists(job, target: job.targets[$0])]
            }
            var records = try Self.checked(await client.pipeline(reads.flatMap { $0 }))[...]
            for (index, read) in zip(unread, reads) {
                states[index] = Self.priorState(of: job, target: job.targets[index], replies: records.prefix(read.count))
                records = records.dropFirst(read.count)
            }
        }
        for index in states.indices where states[index] == .inRetryQueue {
            states[index] = try await confirmedInRetryQueue(job, target: job.targets[index])
        }
        return states
    }

    /// A retry entry a redelivery found (`EXISTS`) owns its target only once a replica has it: the entry may be one
    /// whose hand-off no replica acknowledged (its job was abandoned, uncommitted, for that), and the redelivery's
    /// commit must not stand on it. Throws `ReplicationShortfall` while no replica acknowledges. An entry gone since
    /// was finished by a scheduler (its record is read) or lost with its node (the target is fresh again).
    @inline(never)
    private func confirmedInRetryQueue(_ job: Job, target: Target) async throws -> PriorState {
        let id = RetryEntry.id(jobId: job.id, bindingId: target.bindingId)
        if try await RedisRetryQueue.confirm(id, client: client, timeout: replicationTimeout) { return .inRetryQueue }
        return try await recordedOutcome(of: job, target: target).map(PriorState.alreadyFinished) ?? .fresh
    }

    /// A job's checks, built out of line so what they hold does not live in the async frame every job in flight
    /// keeps: per target, its record reads and retry check (`readingRecords`), then its claim (dedupe on).
    struct Checks {
        let job: Job
        let claiming: Bool
        var commands: [RedisCommand] = []
        /// Per target, the range of `commands` that reads its record and retry entry (empty when not read).
        var reads: [Range<Int>] = []

        @inline(never)
        init(_ job: Job, dedupeWindow: Int64, readingRecords: Bool, buckets: RecordBuckets, now: Int64) {
            self.job = job
            claiming = dedupeWindow > 0
            let identity = claiming ? DedupeWindows.identity(of: job) : ""
            reads.reserveCapacity(job.targets.count)
            for target in job.targets {
                let start = commands.count
                if readingRecords {
                    commands.append(RedisDeliveryStore.recordRead(job, target: target, buckets: buckets, now: now))
                    commands.append(RedisDeliveryStore.retryExists(job, target: target))
                }
                reads.append(start..<commands.count)
                // A target that is unbound or refused is never sent: it claims no window another job's send would miss.
                if claiming, target.isDeliverable {
                    let key = RedisKeys.dedupeKey(bindingId: target.bindingId, identity: identity)
                    var claim = RedisCommand(argumentCount: 7, capacity: key.byteCount + job.id.utf8.count + 40)
                    claim.append("SET")
                    claim.append(key)
                    claim.append(job.id)
                    claim.append("NX")
                    claim.append("GET")
                    claim.append("PX")
                    claim.append(dedupeWindow)
                    commands.append(claim)
                }
            }
        }

        /// What the replies say of each target, and the first deliveries whose own job id already held the window
        /// (their records are read next).
        @inline(never)
        func priorStates(replies: [RedisValue]) -> (states: [PriorState], unread: [Int]) {
            var states: [PriorState] = []
            states.reserveCapacity(job.targets.count)
            var unread: [Int] = []
            for (index, target) in job.targets.enumerated() {
                let read = reads[index]
                var state = PriorState.fresh
                if !read.isEmpty { state = RedisDeliveryStore.priorState(of: job, target: target, replies: replies[read]) }
                // The claim's holder: nil when this job took the window now, else whoever holds it.
                if claiming, target.isDeliverable, state == .fresh, let holder = replies[read.upperBound].string {
                    if holder != job.id {
                        state = .duplicate(ofJob: holder)
                    } else if read.isEmpty {
                        unread.append(index)
                    }
                }
                states.append(state)
            }
            return (states, unread)
        }
    }

    /// The target's record read from every hash it can be in, in one command (the hashes share the record's shard,
    /// so one slot).
    private static func recordRead(_ job: Job, target: Target, buckets: RecordBuckets, now: Int64) -> RedisCommand {
        let digest = RedisKeys.recordDigest(bindingId: target.bindingId, jobId: job.id)
        let hashes = buckets.buckets(of: digest, at: now)
        var read = RedisCommand(
            argumentCount: 4 + hashes.count,
            capacity: 4 + readRecordScript.utf8.count + 2 + hashes.reduce(0) { $0 + $1.byteCount } + digest.count)
        read.append("EVAL")
        read.append(readRecordScript)
        read.append(Int64(hashes.count))
        for hash in hashes { read.append(hash) }
        read.append(bytes: digest)
        return read
    }

    /// The field `ARGV[1]` of the first of `KEYS` that has it, or nil. Sent whole with `EVAL` (Redis caches it by
    /// its SHA-1) rather than as a `RedisScript` through `RedisClient.evaluateAll`: it rides in the same pipeline as
    /// the job's other checks, where a `NOSCRIPT` answer would need a path of its own, and only redelivered offsets
    /// send it.
    static let readRecordScript =
        "for _, key in ipairs(KEYS) do local value = redis.call('HGET', key, ARGV[1]) if value then return value end end return false"

    /// `EXISTS` of the target's retry entry.
    private static func retryExists(_ job: Job, target: Target) -> RedisCommand {
        let entry = Array(RetryEntry.id(jobId: job.id, bindingId: target.bindingId).utf8)
        let retry = RedisKeys.RetryEntryKey(id: entry, shard: RedisRetryQueue.shard(ofBytes: entry))
        var exists = RedisCommand(argumentCount: 2, capacity: retry.byteCount + 6)
        exists.append("EXISTS")
        exists.append(retry)
        return exists
    }

    /// The replies to `recordRead` then `retryExists`.
    private static func priorState(of job: Job, target: Target, replies: ArraySlice<RedisValue>) -> PriorState {
        if let outcome = recorded(of: job, target: target, replies: replies.dropLast()) { return .alreadyFinished(outcome) }
        return (replies.last?.integer ?? 0) > 0 ? .inRetryQueue : .fresh
    }

    private static func recorded(of job: Job, target: Target, replies: some Sequence<RedisValue>) -> Outcome? {
        for reply in replies {
            if case .bulk(let bytes) = reply, let outcome = OutcomeRecord.decode(bytes, job: job, target: target) { return outcome }
        }
        return nil
    }

    private static func checked(_ replies: [RedisValue]) throws -> [RedisValue] {
        if case .error(let message)? = replies.first(where: { if case .error = $0 { true } else { false } }) {
            throw RedisError.reply(message)
        }
        return replies
    }

    public func record(_ outcomes: [EncodedOutcome], completion: @escaping @Sendable ((any Error)?) -> Void) {
        let now = clock()
        let slice = buckets.slice(at: now)
        var commands: [RedisCommand] = []
        commands.reserveCapacity(outcomes.count + 1)
        var shards: [Int] = []
        for encoded in outcomes {
            let (command, shard) = Self.recording(encoded.outcome, buckets: buckets, slice: slice)
            commands.append(command)
            if !shards.contains(shard) { shards.append(shard) }
        }
        let expiring = expiriesSet.withLock { $0.due(shards, slice: slice, now: now) }
        let lifetime = buckets.lifetime(at: now)
        for shard in expiring {
            let bucket = RedisKeys.RecordBucketKey(shard: shard, sliceLength: buckets.slice, slice: slice)
            var expire = RedisCommand(argumentCount: 3, capacity: bucket.byteCount + 28)
            expire.append("PEXPIRE")
            expire.append(bucket)
            expire.append(lifetime)
            commands.append(expire)
        }
        client.pipeline(commands) { [self] result in
            do {
                _ = try Self.checked(result.get())
                if !expiring.isEmpty { expiriesSet.withLock { $0.set(expiring, slice: slice, now: now) } }
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    /// When this replica last set the expiry of each shard's record hash of the slice it writes to now.
    struct ExpiriesSet {
        private var slice: Int64 = -1
        private var setAt: [Int64] = []

        /// The shards among `shards` whose hash of `slice` this replica has not set the expiry of for
        /// `expiryRefresh`.
        mutating func due(_ shards: [Int], slice: Int64, now: Int64) -> [Int] {
            if slice != self.slice {
                self.slice = slice
                setAt = Array(repeating: .min, count: RecordBuckets.shardCount)
            }
            return shards.filter { now.subtracting(saturating: setAt[$0]) >= RedisDeliveryStore.expiryRefresh }
        }

        mutating func set(_ shards: [Int], slice: Int64, now: Int64) {
            guard slice == self.slice else { return }
            for shard in shards { setAt[shard] = now }
        }
    }

    @inline(never)
    private static func recording(_ outcome: Outcome, buckets: RecordBuckets, slice: Int64) -> (RedisCommand, shard: Int) {
        let digest = RedisKeys.recordDigest(bindingId: outcome.bindingId, jobId: outcome.jobId)
        let shard = RecordBuckets.shard(of: digest)
        let bucket = RedisKeys.RecordBucketKey(shard: shard, sliceLength: buckets.slice, slice: slice)
        let value = OutcomeRecord.encode(outcome)
        var command = RedisCommand(argumentCount: 4, capacity: bucket.byteCount + digest.count + value.count + 8)
        command.append("HSET")
        command.append(bucket)
        command.append(bytes: digest)
        command.append(bytes: value)
        return (command, shard)
    }

    public func recordedOutcome(of job: Job, target: Target) async throws -> Outcome? {
        let replies = try Self.checked(await client.pipeline([Self.recordRead(job, target: target, buckets: buckets, now: clock())]))
        return Self.recorded(of: job, target: target, replies: replies)
    }

    public func recordCancellation(_ cancel: Job) async throws {
        guard let key = CallCancellation.key(of: cancel), !cancel.targets.isEmpty else { return }
        let value = CallCancellation(cancelJobId: cancel.id, createdAt: cancel.createdAt).encoded
        let commands = cancel.targets.map { target in
            RedisCommand(
                "SET", RedisKeys.cancellation(bindingId: target.bindingId, userId: cancel.userId, key: key), value,
                "PX", String(buckets.retention))
        }
        _ = try Self.checked(await client.pipeline(commands))
    }

    public func cancellation(of call: Job, bindingId: String) async throws -> CallCancellation? {
        guard let key = CallCancellation.key(of: call) else { return nil }
        let reply = try await client.command(
            RedisCommand("GET", RedisKeys.cancellation(bindingId: bindingId, userId: call.userId, key: key)))
        return reply.string.flatMap(CallCancellation.init(encoded:))
    }

    /// A new fence (`f`, counted up) and the offset marked (`o`) of a partition's mark.
    static let takeMarkScript = RedisScript(
        """
        local fence = redis.call('HINCRBY', KEYS[1], 'f', 1)
        return {fence, redis.call('HGET', KEYS[1], 'o')}
        """)

    /// Raises `o` to ARGV[2] while `f` is ARGV[1]: 1, else 0 (the partition has a newer owner). Offsets are compared
    /// as decimal strings without sign or leading zeros (longer is greater, then byte by byte): Lua's numbers are
    /// doubles, exact only up to 2^53.
    static let advanceMarkScript = RedisScript(
        """
        if redis.call('HGET', KEYS[1], 'f') ~= ARGV[1] then return 0 end
        local marked = redis.call('HGET', KEYS[1], 'o')
        local offset = ARGV[2]
        if not marked or #offset > #marked or (#offset == #marked and offset > marked) then
            redis.call('HSET', KEYS[1], 'o', offset)
        end
        return 1
        """)

    public func takeMark(of partition: MarkedPartition) async throws -> PartitionMark {
        let reply = try await client.evaluate(Self.takeMarkScript, keys: [RedisKeys.mark(partition)], arguments: [])
        guard case .array(let values) = reply, values.count == 2, let fence = values[0].integer else {
            throw RedisError.reply("unexpected reply to the partition mark script: \(reply)")
        }
        return PartitionMark(fence: fence, offset: values[1].string.flatMap { Int64($0) })
    }

    public func advanceMark(of partition: MarkedPartition, fence: Int64, to offset: Int64) async throws -> Bool {
        let reply = try await client.evaluate(
            Self.advanceMarkScript, keys: [RedisKeys.mark(partition)],
            arguments: [Array(String(fence).utf8), Array(String(max(offset, 0)).utf8)])
        return reply.integer == 1
    }
}

import PushCore

/// Dedupe windows, idempotency records and partition marks in Redis, shared by every replica.
///
/// A first delivery (`prepare(_:dedupeWindow:firstDelivery: true)`) sends one command per target when dedupe is on,
/// `SET d <jobId> NX GET PX <window>`, whose reply is the window's holder, and none when it is off; its final
/// outcome is one `SET r <record> PX <retention>`. A job whose offset may have been handed out before reads, in the
/// same round trip, each target's record and whether its retry entry exists. The claim names the job, so the same
/// job redelivered by Kafka is not a duplicate of itself; a first delivery whose own id already holds the window
/// (the job was produced twice) reads its records in a second round trip.
public final class RedisDeliveryStore: DeliveryStore {
    private let client: RedisClient

    public init(client: RedisClient) { self.client = client }

    public func prepare(_ job: Job, dedupeWindow: Int64, firstDelivery: Bool) async throws -> [PriorState] {
        let commands = Self.preparing(job, dedupeWindow: dedupeWindow, readingRecords: !firstDelivery)
        guard !commands.isEmpty else { return Array(repeating: .fresh, count: job.targets.count) }
        let replies = try Self.checked(await client.pipeline(commands))
        var (states, unread) = Self.priorStates(of: job, dedupeWindow: dedupeWindow, readRecords: !firstDelivery, replies: replies)
        guard !unread.isEmpty else { return states }
        let records = try Self.checked(await client.pipeline(unread.flatMap { Self.reading(job, target: job.targets[$0]) }))
        for (position, index) in unread.enumerated() {
            states[index] = Self.priorState(
                of: job, target: job.targets[index], record: records[position * 2], retry: records[position * 2 + 1])
        }
        return states
    }

    // The steps between `prepare`'s round trips are functions of their own, out of line, so what they
    // build does not live in the async frame every job in flight keeps.
    @inline(never)
    static func preparing(_ job: Job, dedupeWindow: Int64, readingRecords: Bool) -> [RedisCommand] {
        let identity = dedupeWindow > 0 ? DedupeWindows.identity(of: job) : ""
        var commands: [RedisCommand] = []
        commands.reserveCapacity(job.targets.count * ((readingRecords ? 2 : 0) + (dedupeWindow > 0 ? 1 : 0)))
        for target in job.targets {
            if readingRecords { commands += reading(job, target: target) }
            if dedupeWindow > 0 {
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
        return commands
    }

    /// `GET` of the target's record and `EXISTS` of its retry entry.
    private static func reading(_ job: Job, target: Target) -> [RedisCommand] {
        let record = RedisKeys.recordKey(bindingId: target.bindingId, jobId: job.id)
        var get = RedisCommand(argumentCount: 2, capacity: record.byteCount + 3)
        get.append("GET")
        get.append(record)
        let entry = Array(RetryEntry.id(jobId: job.id, bindingId: target.bindingId).utf8)
        let retry = RedisKeys.RetryEntryKey(id: entry, shard: RedisRetryQueue.shard(ofBytes: entry))
        var exists = RedisCommand(argumentCount: 2, capacity: retry.byteCount + 6)
        exists.append("EXISTS")
        exists.append(retry)
        return [get, exists]
    }

    private static func priorState(of job: Job, target: Target, record: RedisValue, retry: RedisValue) -> PriorState {
        if case .bulk(let bytes) = record, let outcome = OutcomeRecord.decode(bytes, job: job, target: target) {
            return .alreadyFinished(outcome)
        }
        return (retry.integer ?? 0) > 0 ? .inRetryQueue : .fresh
    }

    /// What the replies to `preparing` say of each target, and the first deliveries whose own job id already held
    /// the window (their records are read next).
    @inline(never)
    private static func priorStates(
        of job: Job, dedupeWindow: Int64, readRecords: Bool, replies: [RedisValue]
    ) -> (states: [PriorState], unread: [Int]) {
        let stride = (readRecords ? 2 : 0) + (dedupeWindow > 0 ? 1 : 0)
        var states: [PriorState] = []
        states.reserveCapacity(job.targets.count)
        var unread: [Int] = []
        for (index, target) in job.targets.enumerated() {
            let base = index * stride
            var state = PriorState.fresh
            if readRecords { state = priorState(of: job, target: target, record: replies[base], retry: replies[base + 1]) }
            // The claim's holder: nil when this job took the window now, else whoever holds it.
            if dedupeWindow > 0, state == .fresh, let holder = replies[base + stride - 1].string {
                if holder != job.id {
                    state = .duplicate(ofJob: holder)
                } else if !readRecords {
                    unread.append(index)
                }
            }
            states.append(state)
        }
        return (states, unread)
    }

    private static func checked(_ replies: [RedisValue]) throws -> [RedisValue] {
        if case .error(let message)? = replies.first(where: { if case .error = $0 { true } else { false } }) {
            throw RedisError.reply(message)
        }
        return replies
    }

    public func record(_ outcomes: [EncodedOutcome], retention: Duration, completion: @escaping @Sendable ((any Error)?) -> Void) {
        client.pipeline(outcomes.map { Self.recording($0.outcome, retention: retention) }) { result in
            do {
                _ = try Self.checked(result.get())
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    @inline(never)
    private static func recording(_ outcome: Outcome, retention: Duration) -> RedisCommand {
        let key = RedisKeys.recordKey(bindingId: outcome.bindingId, jobId: outcome.jobId)
        let value = OutcomeRecord.encode(outcome)
        var command = RedisCommand(argumentCount: 5, capacity: key.byteCount + value.count + 40)
        command.append("SET")
        command.append(key)
        command.append(bytes: value)
        command.append("PX")
        command.append(max(retention.milliseconds, 1))
        return command
    }

    public func recordedOutcome(of job: Job, target: Target) async throws -> Outcome? {
        let reply = try await client.command(RedisCommand("GET", RedisKeys.record(bindingId: target.bindingId, jobId: job.id)))
        guard case .bulk(let bytes) = reply else { return nil }
        return OutcomeRecord.decode(bytes, job: job, target: target)
    }

    public func recordCancellation(_ cancel: Job, retention: Duration) async throws {
        guard let key = CallCancellation.key(of: cancel), !cancel.targets.isEmpty else { return }
        let value = CallCancellation(cancelJobId: cancel.id, createdAt: cancel.createdAt).encoded
        let commands = cancel.targets.map { target in
            RedisCommand(
                "SET", RedisKeys.cancellation(bindingId: target.bindingId, userId: cancel.userId, key: key), value,
                "PX", String(max(retention.milliseconds, 1)))
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

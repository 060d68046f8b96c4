import PushCore

/// Dedupe windows and idempotency records in Redis, shared by every replica.
///
/// A job's checks take one round trip: per target `GET sent`, `EXISTS` of its retry entry, and when dedupe is on
/// `SET dd <jobId> NX PX <window>` + `GET dd`. The claim names the job, so the same job
/// redelivered by Kafka is not a duplicate of itself.
public final class RedisDeliveryStore: DeliveryStore {
    private let client: RedisClient

    public init(client: RedisClient) { self.client = client }

    public func prepare(_ job: Job, dedupeWindow: Int64) async throws -> [PriorState] {
        let replies = try Self.checked(await client.pipeline(Self.preparing(job, dedupeWindow: dedupeWindow)))
        var (states, held) = Self.priorStates(of: job, dedupeWindow: dedupeWindow, replies: replies)
        // The window's holder is read only when it is not this job: a second round trip for duplicates
        // and redeliveries, none for the usual first send.
        guard !held.isEmpty else { return states }
        let identity = DedupeWindows.identity(of: job)
        let holders = try Self.checked(
            await client.pipeline(
                held.map {
                    RedisCommand("GET", RedisKeys.dedupe(bindingId: job.targets[$0].bindingId, identity: identity))
                }))
        for (index, holder) in zip(held, holders) {
            // An ended window (nil) or this job's own earlier claim (a redelivery) leaves the target fresh.
            if let holder = holder.string, holder != job.id { states[index] = .duplicate(ofJob: holder) }
        }
        return states
    }

    // The steps between `prepare`'s round trips are functions of their own, out of line, so what they
    // build does not live in the async frame every job in flight keeps.
    @inline(never)
    static func preparing(_ job: Job, dedupeWindow: Int64) -> [RedisCommand] {
        let identity = DedupeWindows.identity(of: job)
        var commands: [RedisCommand] = []
        commands.reserveCapacity(job.targets.count * 3)
        for target in job.targets {
            let sent = RedisKeys.sentKey(bindingId: target.bindingId, jobId: job.id)
            var get = RedisCommand(argumentCount: 2, capacity: sent.byteCount + 3)
            get.append("GET")
            get.append(sent)
            commands.append(get)
            let entry = Array(RetryEntry.id(jobId: job.id, bindingId: target.bindingId).utf8)
            let retry = RedisKeys.RetryEntryKey(id: entry, shard: RedisRetryQueue.shard(ofBytes: entry))
            var exists = RedisCommand(argumentCount: 2, capacity: retry.byteCount + 6)
            exists.append("EXISTS")
            exists.append(retry)
            commands.append(exists)
            if dedupeWindow > 0 {
                let key = RedisKeys.dedupeKey(bindingId: target.bindingId, identity: identity)
                var claim = RedisCommand(argumentCount: 6, capacity: key.byteCount + job.id.utf8.count + 32)
                claim.append("SET")
                claim.append(key)
                claim.append(job.id)
                claim.append("NX")
                claim.append("PX")
                claim.append(dedupeWindow)
                commands.append(claim)
            }
        }
        return commands
    }

    /// What the replies to `preparing` say of each target, and the targets whose dedupe window another job may hold.
    @inline(never)
    private static func priorStates(of job: Job, dedupeWindow: Int64, replies: [RedisValue]) -> (states: [PriorState], held: [Int]) {
        let stride = 2 + (dedupeWindow > 0 ? 1 : 0)
        let states: [PriorState] = job.targets.indices.map { index in
            let base = index * stride
            if case .bulk(let bytes) = replies[base], let outcome = Outcome(json: bytes) { return .alreadyFinished(outcome) }
            return (replies[base + 1].integer ?? 0) > 0 ? .inRetryQueue : .fresh
        }
        let held = job.targets.indices.filter {
            dedupeWindow > 0 && states[$0] == .fresh && replies[$0 * stride + stride - 1] != .status("OK")
        }
        return (states, held)
    }

    private static func checked(_ replies: [RedisValue]) throws -> [RedisValue] {
        if case .error(let message)? = replies.first(where: { if case .error = $0 { true } else { false } }) {
            throw RedisError.reply(message)
        }
        return replies
    }

    public func record(_ outcome: Outcome, retention: Duration) async throws {
        try await record([outcome], retention: retention)
    }

    public func record(_ outcomes: [Outcome], retention: Duration) async throws {
        _ = try Self.checked(await client.pipeline(outcomes.map { Self.recording(EncodedOutcome($0), retention: retention) }))
    }

    public func record(_ outcomes: [EncodedOutcome], retention: Duration, completion: @escaping @Sendable ((any Error)?) -> Void) {
        client.pipeline(outcomes.map { Self.recording($0, retention: retention) }) { result in
            do {
                _ = try Self.checked(result.get())
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    @inline(never)
    private static func recording(_ encoded: EncodedOutcome, retention: Duration) -> RedisCommand {
        let outcome = encoded.outcome
        let key = RedisKeys.sentKey(bindingId: outcome.bindingId, jobId: outcome.jobId)
        let value = encoded.json
        var command = RedisCommand(argumentCount: 5, capacity: key.byteCount + value.count + 32)
        command.append("SET")
        command.append(key)
        command.append(bytes: value)
        command.append("PX")
        command.append(max(retention.milliseconds, 1))
        return command
    }

    public func recordedOutcome(jobId: String, bindingId: String) async throws -> Outcome? {
        guard case .bulk(let bytes) = try await client.command(RedisCommand("GET", RedisKeys.sent(bindingId: bindingId, jobId: jobId)))
        else { return nil }
        return Outcome(json: bytes)
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
}

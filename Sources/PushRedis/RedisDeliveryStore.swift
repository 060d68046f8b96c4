import PushCore

/// Dedupe windows and idempotency records in Redis, shared by every replica.
///
/// A job's checks take one round trip: per target `GET sent`, `EXISTS` of its retry entry (in its shard and in the
/// queue of earlier versions), and when dedupe is on
/// `SET dd <jobId> NX PX <window>` + `GET dd`. The claim names the job, so the same job
/// redelivered by Kafka is not a duplicate of itself.
public final class RedisDeliveryStore: DeliveryStore {
    private let client: RedisClient

    public init(client: RedisClient) { self.client = client }

    public func prepare(_ job: Job, dedupeWindow: Int64) async throws -> [PriorState] {
        let identity = DedupeWindows.identity(of: job)
        var commands: [RedisCommand] = []
        for target in job.targets {
            commands.append(RedisCommand("GET", RedisKeys.sent(bindingId: target.bindingId, jobId: job.id)))
            let entry = RetryEntry.id(jobId: job.id, bindingId: target.bindingId)
            commands.append(RedisCommand("EXISTS", RedisKeys.retryEntry(entry, shard: RedisRetryQueue.shard(of: entry))))
            commands.append(RedisCommand("EXISTS", RedisKeys.retryEntry(entry, shard: nil)))
            if dedupeWindow > 0 {
                let key = RedisKeys.dedupe(bindingId: target.bindingId, identity: identity)
                commands.append(RedisCommand("SET", key, job.id, "NX", "PX", String(dedupeWindow)))
                commands.append(RedisCommand("GET", key))
            }
        }
        let replies = try await client.pipeline(commands)
        if case .error(let message)? = replies.first(where: { if case .error = $0 { true } else { false } }) {
            throw RedisError.reply(message)
        }
        let stride = dedupeWindow > 0 ? 5 : 3
        return job.targets.indices.map { index in
            let base = index * stride
            if case .bulk(let bytes) = replies[base], let outcome = Outcome(json: bytes) {
                return .alreadyFinished(outcome)
            }
            if replies[base + 1] == .integer(1) || replies[base + 2] == .integer(1) { return .inRetryQueue }
            guard dedupeWindow > 0 else { return .fresh }
            if replies[base + 3] == .status("OK") { return .fresh }
            let holder = replies[base + 4].string
            return holder == nil || holder == job.id ? .fresh : .duplicate(ofJob: holder!)
        }
    }

    public func record(_ outcome: Outcome, retention: Duration) async throws {
        _ = try await client.command(RedisCommand([
            Array("SET".utf8), Array(RedisKeys.sent(bindingId: outcome.bindingId, jobId: outcome.jobId).utf8),
            outcome.encoded(), Array("PX".utf8), Array(String(max(retention.milliseconds, 1)).utf8),
        ]))
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
            RedisCommand("SET", RedisKeys.cancellation(bindingId: target.bindingId, userId: cancel.userId, key: key), value,
                         "PX", String(max(retention.milliseconds, 1)))
        }
        let replies = try await client.pipeline(commands)
        if case .error(let message)? = replies.first(where: { if case .error = $0 { true } else { false } }) {
            throw RedisError.reply(message)
        }
    }

    public func cancellation(of call: Job, bindingId: String) async throws -> CallCancellation? {
        guard let key = CallCancellation.key(of: call) else { return nil }
        let reply = try await client.command(RedisCommand("GET", RedisKeys.cancellation(bindingId: bindingId, userId: call.userId, key: key)))
        return reply.string.flatMap(CallCancellation.init(encoded:))
    }
}

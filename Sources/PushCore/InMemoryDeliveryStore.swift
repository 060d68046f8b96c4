import Synchronization

/// Dedupe and idempotency records in this process only: for the demo and single-replica
/// runs without Redis. Lost on restart; not shared between replicas.
public final class InMemoryDeliveryStore: DeliveryStore {
    private struct Entry<Value> {
        var value: Value
        var expiresAt: Int64
    }

    private struct State {
        var claims: [String: Entry<String>] = [:]
        var outcomes: [String: Entry<Outcome>] = [:]
        var cancellations: [String: Entry<CallCancellation>] = [:]
        /// One per partition of the topics consumed: bounded by the topics' partitions.
        var marks: [MarkedPartition: PartitionMark] = [:]
        var operations = 0
        var nextSweep = 1024

        /// Drops expired entries now and then, so memory follows the live windows only. A sweep visits
        /// every entry, so the next waits for as many operations as there are entries left: each
        /// operation pays for one entry visited at most, however many are held.
        mutating func sweep(now: Int64) {
            operations += 1
            guard operations >= nextSweep else { return }
            claims = claims.filter { $0.value.expiresAt > now }
            outcomes = outcomes.filter { $0.value.expiresAt > now }
            cancellations = cancellations.filter { $0.value.expiresAt > now }
            nextSweep = operations + max(1024, claims.count + outcomes.count + cancellations.count)
        }
    }

    private let state = Mutex(State())

    /// Dedupe claims, outcomes and cancellations held now, expired or not.
    var heldEntries: Int { state.withLock { $0.claims.count + $0.outcomes.count + $0.cancellations.count } }
    private let clock: @Sendable () -> Int64
    private let retention: Int64

    /// - Parameter recordRetention: how long final outcomes and cancels are kept.
    public init(recordRetention: Duration = .seconds(3_600), clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds) {
        retention = max(1, recordRetention.milliseconds)
        self.clock = clock
    }

    public func prepare(
        _ job: Job, dedupeWindow: Int64, firstDelivery: Bool, completion: @escaping @Sendable (Result<[PriorState], any Error>) -> Void
    ) {
        completion(.success(prepared(job, dedupeWindow: dedupeWindow, firstDelivery: firstDelivery)))
    }

    private func prepared(_ job: Job, dedupeWindow: Int64, firstDelivery: Bool) -> [PriorState] {
        let now = clock()
        let identity = DedupeWindows.identity(of: job)
        return state.withLock { state in
            state.sweep(now: now)
            return job.targets.map { target in
                let key = "\(target.bindingId)/\(identity)"
                let holder = dedupeWindow > 0 ? state.claims[key].flatMap { $0.expiresAt > now ? $0.value : nil } : nil
                // As in Redis: a first delivery reads its record only when its own id already holds the window.
                if !firstDelivery || holder == job.id,
                    let recorded = state.outcomes["\(target.bindingId)/\(job.id)"], recorded.expiresAt > now
                {
                    return .alreadyFinished(recorded.value)
                }
                guard dedupeWindow > 0, target.isDeliverable else { return .fresh }
                if let holder, holder != job.id { return .duplicate(ofJob: holder) }
                if holder == nil { state.claims[key] = Entry(value: job.id, expiresAt: now.adding(saturating: dedupeWindow)) }
                return .fresh
            }
        }
    }

    /// Records at once, on the caller's thread.
    public func record(_ outcomes: [EncodedOutcome], completion: @escaping @Sendable ((any Error)?) -> Void) {
        let now = clock()
        state.withLock { state in
            for encoded in outcomes {
                let outcome = encoded.outcome
                state.outcomes["\(outcome.bindingId)/\(outcome.jobId)"] = Entry(
                    value: outcome, expiresAt: now.adding(saturating: retention))
            }
        }
        completion(nil)
    }

    public func recordedOutcome(of job: Job, target: Target) async throws -> Outcome? {
        let now = clock()
        return state.withLock { state in
            state.outcomes["\(target.bindingId)/\(job.id)"].flatMap { $0.expiresAt > now ? $0.value : nil }
        }
    }

    public func takeMark(of partition: MarkedPartition) async throws -> PartitionMark {
        state.withLock { state in
            var mark = state.marks[partition] ?? PartitionMark(fence: 0, offset: nil)
            mark.fence += 1
            state.marks[partition] = mark
            return mark
        }
    }

    public func advanceMark(of partition: MarkedPartition, fence: Int64, to offset: Int64) async throws -> Bool {
        state.withLock { state in
            guard var mark = state.marks[partition], mark.fence == fence else { return false }
            mark.offset = max(mark.offset ?? offset, offset)
            state.marks[partition] = mark
            return true
        }
    }

    public func recordCancellation(_ cancel: Job) async throws {
        guard let key = CallCancellation.key(of: cancel) else { return }
        let now = clock()
        let cancellation = CallCancellation(cancelJobId: cancel.id, createdAt: cancel.createdAt)
        state.withLock { state in
            for target in cancel.targets {
                state.cancellations[Self.cancellationKey(cancel.userId, key, target.bindingId)] =
                    Entry(value: cancellation, expiresAt: now.adding(saturating: retention))
            }
        }
    }

    public func cancellation(of call: Job, bindingId: String) async throws -> CallCancellation? {
        guard let key = CallCancellation.key(of: call) else { return nil }
        let now = clock()
        return state.withLock { state in
            state.cancellations[Self.cancellationKey(call.userId, key, bindingId)].flatMap { $0.expiresAt > now ? $0.value : nil }
        }
    }

    private static func cancellationKey(_ userId: String, _ key: String, _ bindingId: String) -> String {
        "\(userId.utf8.count):\(userId)/\(bindingId.utf8.count):\(bindingId)/\(key)"
    }
}

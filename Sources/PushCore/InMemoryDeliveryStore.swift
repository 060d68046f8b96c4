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

    public init(clock: @escaping @Sendable () -> Int64 = currentTimeMilliseconds) { self.clock = clock }

    public func prepare(_ job: Job, dedupeWindow: Int64) async throws -> [PriorState] {
        let now = clock()
        let identity = DedupeWindows.identity(of: job)
        return state.withLock { state in
            state.sweep(now: now)
            return job.targets.map { target in
                if let recorded = state.outcomes["\(target.bindingId)/\(job.id)"], recorded.expiresAt > now {
                    return .alreadyFinished(recorded.value)
                }
                guard dedupeWindow > 0 else { return .fresh }
                let key = "\(target.bindingId)/\(identity)"
                if let claim = state.claims[key], claim.expiresAt > now, claim.value != job.id {
                    return .duplicate(ofJob: claim.value)
                }
                if state.claims[key].map({ $0.expiresAt <= now }) ?? true {
                    state.claims[key] = Entry(value: job.id, expiresAt: now.adding(saturating: dedupeWindow))
                }
                return .fresh
            }
        }
    }

    public func record(_ outcome: Outcome, retention: Duration) async throws {
        recordNow([outcome], retention: retention)
    }

    /// Records at once, on the caller's thread.
    public func record(_ outcomes: [EncodedOutcome], retention: Duration, completion: @escaping @Sendable ((any Error)?) -> Void) {
        recordNow(outcomes.map(\.outcome), retention: retention)
        completion(nil)
    }

    private func recordNow(_ outcomes: [Outcome], retention: Duration) {
        let now = clock()
        state.withLock { state in
            for outcome in outcomes {
                state.outcomes["\(outcome.bindingId)/\(outcome.jobId)"] = Entry(
                    value: outcome, expiresAt: now.adding(saturating: retention.milliseconds))
            }
        }
    }

    public func recordedOutcome(jobId: String, bindingId: String) async throws -> Outcome? {
        let now = clock()
        return state.withLock { state in
            state.outcomes["\(bindingId)/\(jobId)"].flatMap { $0.expiresAt > now ? $0.value : nil }
        }
    }

    public func recordCancellation(_ cancel: Job, retention: Duration) async throws {
        guard let key = CallCancellation.key(of: cancel) else { return }
        let now = clock()
        let cancellation = CallCancellation(cancelJobId: cancel.id, createdAt: cancel.createdAt)
        state.withLock { state in
            for target in cancel.targets {
                state.cancellations[Self.cancellationKey(cancel.userId, key, target.bindingId)] =
                    Entry(value: cancellation, expiresAt: now.adding(saturating: retention.milliseconds))
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

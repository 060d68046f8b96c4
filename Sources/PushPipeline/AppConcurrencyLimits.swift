import PushCore
import Synchronization

/// At most `limit` requests in flight per delivery scope (an app; for Web Push a push
/// service's origin, with the plugin's own cap), like Sygnal's `inflight_request_limit`, so
/// one app or push service that hangs holds a bounded share of the worker. A request over
/// the limit waits for a slot of its own scope (urgent ones first,
/// then oldest first); its job counts as parked, not as in flight, so jobs of other apps
/// consumed after it keep flowing (`JobParking`). Each time a request has to wait,
/// `push_app_concurrency_limited_total{provider,app}` counts it.
public final class AppConcurrencyLimits: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Bool, Never>
    }

    private struct Slots {
        var running = 0
        var waiters = LaneQueue<Waiter>()

        var isIdle: Bool { running == 0 && waiters.isEmpty }
    }

    private struct State {
        var slots: [DeliveryScope: Slots] = [:]
        var nextID: UInt64 = 0
    }

    public let limit: Int
    private let metrics: PipelineMetrics
    private let state = Mutex(State())

    public init(limit: Int, metrics: PipelineMetrics) {
        self.limit = max(1, limit)
        self.metrics = metrics
    }

    /// Waits for a slot of `key`; false when the task was cancelled while waiting.
    /// Every `true` must be balanced by one `release`.
    func acquire(_ key: DeliveryScope, lane: Lane, parking: JobParking?) async -> Bool {
        let limit = key.inFlightLimit.map { max(1, $0) } ?? limit
        let id: UInt64? = state.withLock { state in
            if state.slots[key, default: Slots()].running < limit {
                state.slots[key, default: Slots()].running += 1
                return nil
            }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return true }
        metrics.appConcurrencyLimited(key)
        parking?.park()
        defer { parking?.unpark() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let granted = state.withLock { state -> Bool? in
                    // The cancellation flag is set before the handler runs: checking it under the lock closes the race.
                    if Task.isCancelled { return false }
                    // A slot may have been released between the first check and now.
                    if state.slots[key, default: Slots()].running < limit {
                        state.slots[key, default: Slots()].running += 1
                        return true
                    }
                    state.slots[key, default: Slots()].waiters.append(Waiter(id: id, continuation: continuation), lane: lane)
                    return nil
                }
                if let granted { continuation.resume(returning: granted) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard state.slots[key] != nil else { return nil }
                return state.slots[key]!.waiters.remove { $0.id == id }
            }
            waiter?.continuation.resume(returning: false)
        }
    }

    /// Frees a slot: hands it to the next waiter of that scope, if any.
    func release(_ key: DeliveryScope) {
        let next = state.withLock { state -> Waiter? in
            // Mutated in place: a copy of the queues out of the dictionary would copy every waiter.
            guard state.slots[key] != nil else { return nil }
            let next = state.slots[key]!.waiters.popFirst()
            if next == nil { state.slots[key]!.running -= 1 }
            if state.slots[key]!.isIdle { state.slots[key] = nil }
            return next
        }
        next?.continuation.resume(returning: true)
    }

    /// Requests running in that scope, for tests.
    func running(_ scope: DeliveryScope) -> Int {
        state.withLock { $0.slots[scope]?.running ?? 0 }
    }
}

/// Whether a consumed job is parked: some of its targets wait for their app's slot. A parked job stays uncommitted but does not count against the
/// lane's in-flight limit (only against its read-ahead bound), so a stalled app cannot
/// stop the jobs of other apps behind it.
final class JobParking: Sendable {
    private let waiting = Mutex(0)
    private let changed: @Sendable (_ parked: Bool) -> Void

    init(changed: @escaping @Sendable (_ parked: Bool) -> Void) {
        self.changed = changed
    }

    // `changed` runs under the lock so a park and an unpark of one job reach the pipeline in order.
    func park() {
        waiting.withLock { count in
            count += 1
            if count == 1 { changed(true) }
        }
    }

    func unpark() {
        waiting.withLock { count in
            count -= 1
            if count == 0 { changed(false) }
        }
    }
}

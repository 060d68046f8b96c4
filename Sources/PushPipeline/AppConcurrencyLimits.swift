import PushCore
import Synchronization

/// At most `limit` requests in flight per delivery scope (an app; for Web Push a push
/// service's origin, with the plugin's own cap), like Sygnal's `inflight_request_limit`, so
/// one app or push service that hangs holds a bounded share of the worker. A request over
/// the limit waits for a slot of its own scope (urgent ones first, then oldest first); its
/// job counts as parked, not as in flight, so jobs of other apps consumed after it keep
/// flowing. Each time a request has to wait, `push_app_concurrency_limited_total{provider,app}`
/// counts it.
///
/// Two ways to wait share each scope's one queue: `reserve`, for a consumed job before its task
/// exists (the waiting job is then a value in the queue, not a suspended task), and `acquire`,
/// for a task already running (a job with several targets, a retry).
public final class AppConcurrencyLimits: Sendable {
    private struct Waiter {
        let id: UInt64
        /// Called outside the lock: true with the slot handed over, false when an `acquire` was cancelled.
        let resume: @Sendable (Bool) -> Void
    }

    private struct Slots {
        var running = 0
        var waiters = LaneQueue<Waiter>()

        var isIdle: Bool { running == 0 && waiters.isEmpty }

        /// Takes a slot if fewer than `limit` run.
        mutating func takeIfFree(below limit: Int) -> Bool {
            guard running < limit else { return false }
            running += 1
            return true
        }

        /// Frees a slot: the next waiter takes it over, or one fewer runs.
        mutating func handOver() -> Waiter? {
            let next = waiters.popFirst()
            if next == nil { running -= 1 }
            return next
        }
    }

    private struct State {
        var slots: [DeliveryScope: Slots] = [:]
        var nextID: UInt64 = 0

        /// Takes a slot of `key` if fewer than `limit` run.
        mutating func takeFreeSlot(of key: DeliveryScope, limit: Int) -> Bool {
            slots[key, default: Slots()].takeIfFree(below: limit)
        }
    }

    /// The answer to `reserve`.
    enum Reservation {
        /// The slot is held now.
        case granted(AppSlot)
        /// The slot is not free: `whenGranted` will be called with it, unless the ticket is withdrawn first.
        case waiting(ticket: UInt64)
    }

    public let limit: Int
    private let metrics: PipelineMetrics
    private let state = Mutex(State())

    public init(limit: Int, metrics: PipelineMetrics) {
        self.limit = max(1, limit)
        self.metrics = metrics
    }

    private func limit(of key: DeliveryScope) -> Int { key.inFlightLimit.map { max(1, $0) } ?? limit }

    /// Takes a slot of `key` if one is free; otherwise queues `whenGranted`, which is called
    /// (outside any lock of this type, on the thread that frees the slot) with the slot once
    /// it is this waiter's turn. Never suspends: the caller keeps the waiting job as a value.
    func reserve(_ key: DeliveryScope, lane: Lane, whenGranted: @escaping @Sendable (AppSlot) -> Void) -> Reservation {
        let limit = limit(of: key)
        let ticket: UInt64? = state.withLock { state in
            if state.takeFreeSlot(of: key, limit: limit) { return nil }
            state.nextID += 1
            let id = state.nextID
            state.slots[key, default: Slots()].waiters.append(Waiter(id: id) { [self] granted in
                if granted { whenGranted(AppSlot(scope: key, limits: self)) }
            }, lane: lane)
            return id
        }
        guard let ticket else { return .granted(AppSlot(scope: key, limits: self)) }
        metrics.appConcurrencyLimited(key)
        return .waiting(ticket: ticket)
    }

    /// Takes these reservations out of their queues; returns the tickets that were still waiting
    /// (their `whenGranted` will never be called). A ticket not returned was granted already.
    func withdraw(_ tickets: Set<UInt64>) -> Set<UInt64> {
        guard !tickets.isEmpty else { return [] }
        return state.withLock { state in
            var withdrawn = Set<UInt64>()
            for key in Array(state.slots.keys) {
                for waiter in state.slots[key]!.waiters.removeAll(where: { tickets.contains($0.id) }) { withdrawn.insert(waiter.id) }
                if state.slots[key]!.isIdle { state.slots[key] = nil }
            }
            return withdrawn
        }
    }

    /// Waits for a slot of `key`; false when the task was cancelled while waiting.
    /// Every `true` must be balanced by one `release`.
    @inline(never)
    func acquire(_ key: DeliveryScope, lane: Lane, parking: JobParking?) async -> Bool {
        let limit = limit(of: key)
        let id: UInt64? = state.withLock { state in
            if state.takeFreeSlot(of: key, limit: limit) { return nil }
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
                    if state.takeFreeSlot(of: key, limit: limit) { return true }
                    state.slots[key, default: Slots()].waiters.append(Waiter(id: id) { continuation.resume(returning: $0) }, lane: lane)
                    return nil
                }
                if let granted { continuation.resume(returning: granted) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                guard state.slots[key] != nil else { return nil }
                return state.slots[key]!.waiters.remove { $0.id == id }
            }
            waiter?.resume(false)
        }
    }

    /// Frees a slot: hands it to the next waiter of that scope, if any.
    func release(_ key: DeliveryScope) {
        let next = state.withLock { state -> Waiter? in
            // Mutated in place, one lookup: a copy of the queues out of the dictionary would copy every waiter.
            guard let index = state.slots.index(forKey: key) else { return nil }
            let next = state.slots.values[index].handOver()
            if state.slots.values[index].isIdle { state.slots.remove(at: index) }
            return next
        }
        next?.resume(true)
    }

    /// Requests running in that scope, for tests.
    func running(_ scope: DeliveryScope) -> Int {
        state.withLock { $0.slots[scope]?.running ?? 0 }
    }
}

/// A slot of one scope, reserved for a job before its task started: its first send takes it
/// (`take`), or the job gives it back unused (`giveBack`), exactly once either way.
final class AppSlot: Sendable {
    let scope: DeliveryScope
    private let limits: AppConcurrencyLimits
    private let held = Atomic<Bool>(true)

    fileprivate init(scope: DeliveryScope, limits: AppConcurrencyLimits) {
        self.scope = scope
        self.limits = limits
    }

    /// For a send to `scope`: true when this slot is taken for it (the sender then releases it
    /// with `AppConcurrencyLimits.release` as usual); false when it was used, given back, or is another scope's.
    func take(for scope: DeliveryScope) -> Bool {
        scope == self.scope && held.exchange(false, ordering: .acquiringAndReleasing)
    }

    /// Frees the slot unless a send took it. Never call it under a lock a waiter's `whenGranted` takes.
    func giveBack() {
        if held.exchange(false, ordering: .acquiringAndReleasing) { limits.release(scope) }
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

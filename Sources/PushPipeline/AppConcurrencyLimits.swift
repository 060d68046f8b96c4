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
/// Scopes whose requests share the connections of one provider endpoint (`DeliveryScope.origin`:
/// every APNs app with token authentication in one environment, every FCM project) also share
/// `originLimit` slots: about what the endpoint's connections carry at once, with room for the
/// requests being prepared and read. A request that holds its app's slot and finds the origin full
/// waits in the origin's queue (urgent first, then oldest first; normal requests leave a tenth of the
/// origin's slots to urgent ones) and still counts as in flight: it
/// waits for the provider's capacity, as it would in the transport's queue of streams, but as a
/// value rather than as a suspended task (`push_origin_concurrency_limited_total{provider}`).
///
/// Two ways to wait share these queues: `reserve`, for a consumed job before its task exists (the
/// waiting job is then a value in the queue, not a suspended task), and `acquire`, for a task
/// already running (a job with several targets, a retry), which counts as parked while it waits
/// for either.
public final class AppConcurrencyLimits: Sendable {
    private struct Waiter {
        let id: UInt64
        let scope: DeliveryScope
        let lane: Lane
        /// Called outside the lock: true with both slots handed over, false when an `acquire` was cancelled.
        let resume: @Sendable (Bool) -> Void
        /// Called outside the lock when the waiter got its app's slot and goes on waiting for its origin's.
        let waitsForOrigin: (@Sendable () -> Void)?
        /// Called outside the lock when the waiter's deadline took it out of its queue.
        var timedOut: (@Sendable () -> Void)? = nil
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

        /// Frees a slot: the next waiter takes it over (a normal one only if `normalAllowed`), or one fewer runs.
        mutating func handOver(normalAllowed: Bool = true) -> Waiter? {
            let next = waiters.popFirst(normalAllowed: normalAllowed)
            if next == nil { running -= 1 }
            return next
        }
    }

    /// What to tell waiters once the lock is released.
    private enum Notice {
        case granted(Waiter)
        case waitsForOrigin(Waiter)
    }

    /// Where a waiter stands after `enter`.
    private enum Stage {
        case granted, waitingForApp, waitingForOrigin
    }

    private struct State {
        var slots: [DeliveryScope: Slots] = [:]
        var origins: [String: Slots] = [:]
        var nextID: UInt64 = 0

        /// Takes the app's slot and then the origin's, or queues the waiter where it has to wait.
        mutating func enter(_ waiter: Waiter, appLimit: Int, originLimit: OriginBound?) -> Stage {
            guard slots[waiter.scope, default: Slots()].takeIfFree(below: appLimit) else {
                slots[waiter.scope]!.waiters.append(waiter, lane: waiter.lane)
                return .waitingForApp
            }
            return enterOrigin(waiter, limit: originLimit) ? .granted : .waitingForOrigin
        }

        /// Takes the app's slot and its origin's if both are free; else takes neither.
        mutating func takeBothIfFree(_ scope: DeliveryScope, lane: Lane, appLimit: Int, originLimit: OriginBound?) -> Bool {
            guard (slots[scope]?.running ?? 0) < appLimit else { return false }
            if let origin = scope.origin, let originLimit {
                guard origins[origin, default: Slots()].takeIfFree(below: originLimit.limit(for: lane)) else { return false }
            }
            return slots[scope, default: Slots()].takeIfFree(below: appLimit)
        }

        /// With the waiter's app slot held: takes its origin's slot (true), or queues it there (false).
        mutating func enterOrigin(_ waiter: Waiter, limit: OriginBound?) -> Bool {
            guard let origin = waiter.scope.origin, let limit else { return true }
            if origins[origin, default: Slots()].takeIfFree(below: limit.limit(for: waiter.lane)) { return true }
            origins[origin]!.waiters.append(waiter, lane: waiter.lane)
            return false
        }

        /// Frees an app slot of `scope`: its next waiter takes it and goes on to its origin.
        mutating func releaseApp(_ scope: DeliveryScope, originLimit: OriginBound?, notices: inout [Notice]) {
            // Mutated in place, one lookup: a copy of the queues out of the dictionary would copy every waiter.
            guard let index = slots.index(forKey: scope) else { return }
            let next = slots.values[index].handOver()
            if slots.values[index].isIdle { slots.remove(at: index) }
            guard let next else { return }
            notices.append(enterOrigin(next, limit: originLimit) ? .granted(next) : .waitsForOrigin(next))
        }

        /// Frees an origin slot: its next waiter (which holds its app slot) takes it.
        mutating func releaseOrigin(_ origin: String, bound: OriginBound, notices: inout [Notice]) {
            guard let index = origins.index(forKey: origin) else { return }
            let next = origins.values[index].handOver(normalAllowed: origins.values[index].running - 1 < bound.normalLimit)
            if origins.values[index].isIdle { origins.remove(at: index) }
            if let next { notices.append(.granted(next)) }
        }
    }

    /// The answer to `reserve`.
    enum Reservation {
        /// Both slots are held now.
        case granted(AppSlot)
        /// The app's slot is not free: `notify` will be told `.granted`, and `.waitsForOrigin` before
        /// that if the app's slot comes before the origin's, unless the ticket is withdrawn first.
        case waitingForApp(ticket: UInt64)
        /// The app's slot is held, the origin's is not free: `notify` will be told `.granted`, unless
        /// the ticket is withdrawn first.
        case waitingForOrigin(ticket: UInt64)
    }

    /// An origin's slots: normal requests leave a tenth of them to urgent ones, as the transport
    /// leaves a tenth of its streams, so a call never waits behind a backlog of messages.
    struct OriginBound {
        let limit: Int
        let normalLimit: Int

        init(_ limit: Int) {
            self.limit = max(1, limit)
            normalLimit = self.limit - self.limit / 10
        }

        func limit(for lane: Lane) -> Int { lane == .urgent ? limit : normalLimit }
    }

    public let limit: Int
    /// Slots per origin; nil: scopes share none.
    let originLimit: OriginBound?
    private let metrics: PipelineMetrics
    private let state = Locked(State())

    public init(limit: Int, originLimit: Int? = nil, metrics: PipelineMetrics) {
        self.limit = max(1, limit)
        self.originLimit = originLimit.map(OriginBound.init)
        self.metrics = metrics
    }

    private func limit(of key: DeliveryScope) -> Int { key.inFlightLimit.map { max(1, $0) } ?? limit }

    private func deliver(_ notices: [Notice]) {
        for notice in notices {
            switch notice {
            case .granted(let waiter): waiter.resume(true)
            case .waitsForOrigin(let waiter):
                metrics.originConcurrencyLimited(waiter.scope)
                waiter.waitsForOrigin?()
            }
        }
    }

    private func countWait(_ stage: Stage, of key: DeliveryScope) {
        switch stage {
        case .granted: break
        case .waitingForApp: metrics.appConcurrencyLimited(key)
        case .waitingForOrigin: metrics.originConcurrencyLimited(key)
        }
    }

    /// What a reservation that waited is told, outside any lock of this type, on the thread that freed the slot.
    enum ReservationEvent {
        /// Its app's slot came before its origin's, which it waits for now.
        case waitsForOrigin
        /// Both slots are its own now.
        case granted(AppSlot)
    }

    /// Takes a slot of `key` (and of its origin) if free; otherwise queues the reservation, which
    /// `notify` tells when it moves on to wait for its origin and when it is granted (unless it is
    /// withdrawn first). Never suspends: the caller keeps the waiting job as a value.
    func reserve(_ key: DeliveryScope, lane: Lane, notify: @escaping @Sendable (ReservationEvent) -> Void) -> Reservation {
        let appLimit = limit(of: key)
        let answer = state.withLock { state -> (Stage, UInt64) in
            if state.takeBothIfFree(key, lane: lane, appLimit: appLimit, originLimit: originLimit) { return (.granted, 0) }
            state.nextID += 1
            let id = state.nextID
            let waiter = Waiter(
                id: id, scope: key, lane: lane,
                resume: { [self] granted in
                    if granted { notify(.granted(AppSlot(scope: key, limits: self))) }
                }, waitsForOrigin: { notify(.waitsForOrigin) })
            return (state.enter(waiter, appLimit: appLimit, originLimit: originLimit), id)
        }
        countWait(answer.0, of: key)
        switch answer.0 {
        case .granted: return .granted(AppSlot(scope: key, limits: self))
        case .waitingForApp: return .waitingForApp(ticket: answer.1)
        case .waitingForOrigin: return .waitingForOrigin(ticket: answer.1)
        }
    }

    /// Takes these reservations out of their queues; returns the tickets that were still waiting
    /// (their `notify` is never told `.granted`). A ticket not returned was granted already. A
    /// reservation that waited for its origin gives its app slot back.
    func withdraw(_ tickets: Set<UInt64>) -> Set<UInt64> {
        guard !tickets.isEmpty else { return [] }
        var notices: [Notice] = []
        let withdrawn = state.withLock { state in
            var withdrawn = Set<UInt64>()
            // App queues first: a slot given back below must not go to a waiter withdrawn with it.
            for key in Array(state.slots.keys) {
                for waiter in state.slots[key]!.waiters.removeAll(where: { tickets.contains($0.id) }) { withdrawn.insert(waiter.id) }
                if state.slots[key]!.isIdle { state.slots[key] = nil }
            }
            for origin in Array(state.origins.keys) {
                let leaving = state.origins[origin]!.waiters.removeAll(where: { tickets.contains($0.id) })
                if state.origins[origin]!.isIdle { state.origins[origin] = nil }
                for waiter in leaving {
                    withdrawn.insert(waiter.id)
                    state.releaseApp(waiter.scope, originLimit: originLimit, notices: &notices)
                }
            }
            return withdrawn
        }
        deliver(notices)
        return withdrawn
    }

    /// How a wait for a slot ended.
    enum SlotWait: Sendable, Equatable {
        /// Both slots are held: balance with one `release`.
        case granted
        /// The task was cancelled while it waited.
        case cancelled
        /// The deadline passed first: nothing is held.
        case timedOut
    }

    /// Waits for a slot of `key` (and of its origin); false when the task was cancelled while waiting.
    /// Every `true` must be balanced by one `release`.
    func acquire(_ key: DeliveryScope, lane: Lane, parking: JobParking?) async -> Bool {
        await acquire(key, lane: lane, parking: parking, until: nil) == .granted
    }

    /// Waits for a slot of `key` (and of its origin) until `deadline` (nil: no deadline; one already passed: only a
    /// slot free now). A waiter is taken out of its queue by exactly one of: the grant, its task's cancellation, its deadline.
    @inline(never)
    func acquire(_ key: DeliveryScope, lane: Lane, parking: JobParking?, until deadline: ContinuousClock.Instant?) async -> SlotWait {
        let appLimit = limit(of: key)
        let originLimit = originLimit
        let id: UInt64? = state.withLock { state in
            if state.takeBothIfFree(key, lane: lane, appLimit: appLimit, originLimit: originLimit) { return nil }
            state.nextID += 1
            return state.nextID
        }
        guard let id else { return .granted }
        if let deadline, deadline <= .now { return .timedOut }
        parking?.park()
        defer { parking?.unpark() }
        let timer = Locked<Task<Void, Never>?>(nil)
        defer { timer.withLock { $0 }?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<SlotWait, Never>) in
                let waiter = Waiter(
                    id: id, scope: key, lane: lane, resume: { continuation.resume(returning: $0 ? .granted : .cancelled) },
                    waitsForOrigin: nil, timedOut: { continuation.resume(returning: .timedOut) })
                let stage = state.withLock { state -> Stage? in
                    // The cancellation flag is set before the handler runs: checking it under the lock closes the race.
                    if Task.isCancelled { return nil }
                    return state.enter(waiter, appLimit: appLimit, originLimit: originLimit)
                }
                guard let stage else { return continuation.resume(returning: .cancelled) }
                countWait(stage, of: key)
                if case .granted = stage { return continuation.resume(returning: .granted) }
                guard let deadline else { return }
                timer.withLock {
                    $0 = Task { [self] in
                        guard (try? await Task.sleep(until: deadline)) != nil else { return }
                        takeOut(id, of: key)?.timedOut?()
                    }
                }
            }
        } onCancel: {
            takeOut(id, of: key)?.resume(false)
        }
    }

    /// Takes a waiting `acquire` out of the queue it is in (giving back the app slot it holds if it waited for its
    /// origin); nil when it is in none (granted, or taken out already).
    private func takeOut(_ id: UInt64, of key: DeliveryScope) -> Waiter? {
        var notices: [Notice] = []
        let waiter = state.withLock { state -> Waiter? in
            if state.slots[key] != nil, let waiter = state.slots[key]!.waiters.remove(where: { $0.id == id }) {
                if state.slots[key]!.isIdle { state.slots[key] = nil }
                return waiter
            }
            guard let origin = key.origin, state.origins[origin] != nil,
                let waiter = state.origins[origin]!.waiters.remove(where: { $0.id == id })
            else { return nil }
            if state.origins[origin]!.isIdle { state.origins[origin] = nil }
            state.releaseApp(key, originLimit: originLimit, notices: &notices)
            return waiter
        }
        deliver(notices)
        return waiter
    }

    /// Frees a slot: hands it (and its origin's) to the next waiters, if any.
    func release(_ key: DeliveryScope) {
        var notices: [Notice] = []
        state.withLock { state in
            // The origin first: the app's next waiter then finds it taken by whoever waited for it.
            if let origin = key.origin, let originLimit { state.releaseOrigin(origin, bound: originLimit, notices: &notices) }
            state.releaseApp(key, originLimit: originLimit, notices: &notices)
        }
        deliver(notices)
    }

    /// Requests running in that scope, for tests.
    func running(_ scope: DeliveryScope) -> Int {
        state.withLock { $0.slots[scope]?.running ?? 0 }
    }

    /// Requests running in that origin, for tests.
    func running(origin: String) -> Int {
        state.withLock { $0.origins[origin]?.running ?? 0 }
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

    /// Frees the slot unless a send took it. Never call it under a lock a reservation's `notify` takes.
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
    private let keyReleased: @Sendable () -> Void

    init(changed: @escaping @Sendable (_ parked: Bool) -> Void, releaseKey: @escaping @Sendable () -> Void = {}) {
        self.changed = changed
        keyReleased = releaseKey
    }

    /// The job waits for a retry in its task: the next job of its Kafka key may start (see `PipelineStateMachine.releaseKey(of:)`).
    func releaseKey() { keyReleased() }

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

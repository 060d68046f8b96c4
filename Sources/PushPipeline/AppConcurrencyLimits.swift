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
/// Scopes whose requests share the connections of one provider endpoint (`DeliveryScope.endpoint`:
/// every APNs app with token authentication in one environment, every FCM project) also share
/// `endpointLimit` slots: about what the endpoint's connections carry at once, with room for the
/// requests being prepared and read. A request that holds its app's slot and finds the endpoint full
/// waits in the endpoint's queue (urgent first, then oldest first; normal requests leave a tenth of the
/// endpoint's slots to urgent ones) and still counts as in flight: it
/// waits for the provider's capacity, as it would in the transport's queue of streams, but as a
/// value rather than as a suspended task (`push_endpoint_concurrency_limited_total{provider}`).
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
        /// Called outside the lock when the waiter got its app's slot and goes on waiting for its endpoint's.
        let waitsForEndpoint: (@Sendable () -> Void)?
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
        case waitsForEndpoint(Waiter)
    }

    /// Where a waiter stands after `enter`.
    private enum Stage {
        case granted, waitingForApp, waitingForEndpoint
    }

    private struct State {
        var slots: [DeliveryScope: Slots] = [:]
        var endpoints: [String: Slots] = [:]
        var nextID: UInt64 = 0

        /// Takes the app's slot and then the endpoint's, or queues the waiter where it has to wait.
        mutating func enter(_ waiter: Waiter, appLimit: Int, endpointLimit: LaneCapacity?) -> Stage {
            guard slots[waiter.scope, default: Slots()].takeIfFree(below: appLimit) else {
                slots[waiter.scope]!.waiters.append(waiter, lane: waiter.lane)
                return .waitingForApp
            }
            return enterEndpoint(waiter, limit: endpointLimit) ? .granted : .waitingForEndpoint
        }

        /// Takes the app's slot and its endpoint's if both are free; else takes neither.
        mutating func takeBothIfFree(_ scope: DeliveryScope, lane: Lane, appLimit: Int, endpointLimit: LaneCapacity?) -> Bool {
            guard (slots[scope]?.running ?? 0) < appLimit else { return false }
            if let endpoint = scope.endpoint, let endpointLimit {
                guard endpoints[endpoint, default: Slots()].takeIfFree(below: endpointLimit.limit(for: lane)) else { return false }
            }
            return slots[scope, default: Slots()].takeIfFree(below: appLimit)
        }

        /// With the waiter's app slot held: takes its endpoint's slot (true), or queues it there (false).
        mutating func enterEndpoint(_ waiter: Waiter, limit: LaneCapacity?) -> Bool {
            guard let endpoint = waiter.scope.endpoint, let limit else { return true }
            if endpoints[endpoint, default: Slots()].takeIfFree(below: limit.limit(for: waiter.lane)) { return true }
            endpoints[endpoint]!.waiters.append(waiter, lane: waiter.lane)
            return false
        }

        /// Frees an app slot of `scope`: its next waiter takes it and goes on to its endpoint.
        mutating func releaseApp(_ scope: DeliveryScope, endpointLimit: LaneCapacity?, notices: inout [Notice]) {
            // Mutated in place, one lookup: a copy of the queues out of the dictionary would copy every waiter.
            guard let index = slots.index(forKey: scope) else { return }
            let next = slots.values[index].handOver()
            if slots.values[index].isIdle { slots.remove(at: index) }
            guard let next else { return }
            notices.append(enterEndpoint(next, limit: endpointLimit) ? .granted(next) : .waitsForEndpoint(next))
        }

        /// Frees an endpoint slot: its next waiter (which holds its app slot) takes it.
        mutating func releaseEndpoint(_ endpoint: String, bound: LaneCapacity, notices: inout [Notice]) {
            guard let index = endpoints.index(forKey: endpoint) else { return }
            let next = endpoints.values[index].handOver(
                normalAllowed: bound.hasRoom(for: .normal, used: endpoints.values[index].running - 1))
            if endpoints.values[index].isIdle { endpoints.remove(at: index) }
            if let next { notices.append(.granted(next)) }
        }
    }

    /// The answer to `reserve`.
    enum Reservation {
        /// Both slots are held now.
        case granted(AppSlot)
        /// The app's slot is not free: `notify` will be told `.granted`, and `.waitsForEndpoint` before
        /// that if the app's slot comes before the endpoint's, unless the ticket is withdrawn first.
        case waitingForApp(ticket: UInt64)
        /// The app's slot is held, the endpoint's is not free: `notify` will be told `.granted`, unless
        /// the ticket is withdrawn first.
        case waitingForEndpoint(ticket: UInt64)
    }

    public let limit: Int
    /// Slots per endpoint (normal requests leave a tenth of them to urgent ones, as the transport leaves a tenth
    /// of its streams); nil: scopes share none.
    let endpointLimit: LaneCapacity?
    private let metrics: PipelineMetrics
    private let state = Locked(State())

    public init(limit: Int, endpointLimit: Int? = nil, metrics: PipelineMetrics) {
        self.limit = max(1, limit)
        self.endpointLimit = endpointLimit.map { LaneCapacity(total: $0) }
        self.metrics = metrics
    }

    private func limit(of key: DeliveryScope) -> Int { key.inFlightLimit.map { max(1, $0) } ?? limit }

    private func deliver(_ notices: [Notice]) {
        for notice in notices {
            switch notice {
            case .granted(let waiter): waiter.resume(true)
            case .waitsForEndpoint(let waiter):
                metrics.endpointConcurrencyLimited(waiter.scope)
                waiter.waitsForEndpoint?()
            }
        }
    }

    private func countWait(_ stage: Stage, of key: DeliveryScope) {
        switch stage {
        case .granted: break
        case .waitingForApp: metrics.appConcurrencyLimited(key)
        case .waitingForEndpoint: metrics.endpointConcurrencyLimited(key)
        }
    }

    /// What a reservation that waited is told, outside any lock of this type, on the thread that freed the slot.
    enum ReservationEvent {
        /// Its app's slot came before its endpoint's, which it waits for now.
        case waitsForEndpoint
        /// Both slots are its own now.
        case granted(AppSlot)
    }

    /// Takes a slot of `key` (and of its endpoint) if free; otherwise queues the reservation, which
    /// `notify` tells when it moves on to wait for its endpoint and when it is granted (unless it is
    /// withdrawn first). Never suspends: the caller keeps the waiting job as a value.
    func reserve(_ key: DeliveryScope, lane: Lane, notify: @escaping @Sendable (ReservationEvent) -> Void) -> Reservation {
        let appLimit = limit(of: key)
        let answer = state.withLock { state -> (Stage, UInt64) in
            if state.takeBothIfFree(key, lane: lane, appLimit: appLimit, endpointLimit: endpointLimit) { return (.granted, 0) }
            state.nextID += 1
            let id = state.nextID
            let waiter = Waiter(
                id: id, scope: key, lane: lane,
                resume: { [self] granted in
                    if granted { notify(.granted(AppSlot(scope: key, limits: self))) }
                }, waitsForEndpoint: { notify(.waitsForEndpoint) })
            return (state.enter(waiter, appLimit: appLimit, endpointLimit: endpointLimit), id)
        }
        countWait(answer.0, of: key)
        switch answer.0 {
        case .granted: return .granted(AppSlot(scope: key, limits: self))
        case .waitingForApp: return .waitingForApp(ticket: answer.1)
        case .waitingForEndpoint: return .waitingForEndpoint(ticket: answer.1)
        }
    }

    /// Takes these reservations out of their queues; returns the tickets that were still waiting
    /// (their `notify` is never told `.granted`). A ticket not returned was granted already. A
    /// reservation that waited for its endpoint gives its app slot back.
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
            for endpoint in Array(state.endpoints.keys) {
                let leaving = state.endpoints[endpoint]!.waiters.removeAll(where: { tickets.contains($0.id) })
                if state.endpoints[endpoint]!.isIdle { state.endpoints[endpoint] = nil }
                for waiter in leaving {
                    withdrawn.insert(waiter.id)
                    state.releaseApp(waiter.scope, endpointLimit: endpointLimit, notices: &notices)
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

    /// Waits for a slot of `key` (and of its endpoint); false when the task was cancelled while waiting.
    /// Every `true` must be balanced by one `release`.
    func acquire(_ key: DeliveryScope, lane: Lane, parking: JobParking?) async -> Bool {
        await acquire(key, lane: lane, parking: parking, until: nil) == .granted
    }

    /// Waits for a slot of `key` (and of its endpoint) until `deadline` (nil: no deadline; one already passed: only a
    /// slot free now). A waiter is taken out of its queue by exactly one of: the grant, its task's cancellation, its deadline.
    @inline(never)
    func acquire(_ key: DeliveryScope, lane: Lane, parking: JobParking?, until deadline: ContinuousClock.Instant?) async -> SlotWait {
        let appLimit = limit(of: key)
        let endpointLimit = endpointLimit
        let id: UInt64? = state.withLock { state in
            if state.takeBothIfFree(key, lane: lane, appLimit: appLimit, endpointLimit: endpointLimit) { return nil }
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
                    waitsForEndpoint: nil, timedOut: { continuation.resume(returning: .timedOut) })
                let stage = state.withLock { state -> Stage? in
                    // The cancellation flag is set before the handler runs: checking it under the lock closes the race.
                    if Task.isCancelled { return nil }
                    return state.enter(waiter, appLimit: appLimit, endpointLimit: endpointLimit)
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
    /// endpoint); nil when it is in none (granted, or taken out already).
    private func takeOut(_ id: UInt64, of key: DeliveryScope) -> Waiter? {
        var notices: [Notice] = []
        let waiter = state.withLock { state -> Waiter? in
            if state.slots[key] != nil, let waiter = state.slots[key]!.waiters.remove(where: { $0.id == id }) {
                if state.slots[key]!.isIdle { state.slots[key] = nil }
                return waiter
            }
            guard let endpoint = key.endpoint, state.endpoints[endpoint] != nil,
                let waiter = state.endpoints[endpoint]!.waiters.remove(where: { $0.id == id })
            else { return nil }
            if state.endpoints[endpoint]!.isIdle { state.endpoints[endpoint] = nil }
            state.releaseApp(key, endpointLimit: endpointLimit, notices: &notices)
            return waiter
        }
        deliver(notices)
        return waiter
    }

    /// Frees a slot: hands it (and its endpoint's) to the next waiters, if any.
    func release(_ key: DeliveryScope) {
        var notices: [Notice] = []
        state.withLock { state in
            // The endpoint first: the app's next waiter then finds it taken by whoever waited for it.
            if let endpoint = key.endpoint, let endpointLimit { state.releaseEndpoint(endpoint, bound: endpointLimit, notices: &notices) }
            state.releaseApp(key, endpointLimit: endpointLimit, notices: &notices)
        }
        deliver(notices)
    }

    /// Requests running in that scope, for tests.
    func running(_ scope: DeliveryScope) -> Int {
        state.withLock { $0.slots[scope]?.running ?? 0 }
    }

    /// Requests running in that endpoint, for tests.
    func running(endpoint: String) -> Int {
        state.withLock { $0.endpoints[endpoint]?.running ?? 0 }
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

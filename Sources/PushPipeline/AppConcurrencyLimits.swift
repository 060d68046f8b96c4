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
    private struct Waiter: SlotWaiter, Sendable {
        let id: UInt64
        let scope: DeliveryScope
        let lane: Lane
        /// Who waits: told outside the lock (one value per waiter, no closure made for each thing it may be told).
        let party: Party

        /// Resumes a task taken out of its queue without its slots (a reservation taken out is its owner's to handle).
        func resumeTask(_ wait: SlotWait) {
            if case .task(let continuation) = party { continuation.resume(returning: wait) }
        }
    }

    private enum Party: Sendable {
        /// A reservation made before its job's task exists: told when both slots are handed over (a job's
        /// slot of its app's first, when its endpoint's is still taken: `waitsForEndpoint`).
        case reservation(@Sendable (ReservationEvent) -> Void)
        /// A task suspended in `acquire`.
        case task(CheckedContinuation<SlotWait, Never>)
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
    private let metrics: PipelineMetrics
    private let state: Locked<SlotQueues<Waiter>>

    /// - Parameter endpointLimit: slots per endpoint, of which normal requests leave a tenth (at least one) to urgent
    ///   ones, as the transport leaves a tenth of its streams; nil: scopes share none.
    public init(limit: Int, endpointLimit: Int? = nil, metrics: PipelineMetrics) {
        self.limit = max(1, limit)
        state = Locked(SlotQueues(endpointLimit: endpointLimit.map { LaneCapacity(total: $0) }))
        self.metrics = metrics
    }

    private func limit(of key: DeliveryScope) -> Int { key.inFlightLimit.map { max(1, $0) } ?? limit }

    private func carryOut(_ actions: [SlotQueues<Waiter>.Action]) {
        for action in actions {
            switch action {
            case .granted(let waiter):
                switch waiter.party {
                case .reservation(let notify): notify(.granted(AppSlot(scope: waiter.scope, limits: self)))
                case .task(let continuation): continuation.resume(returning: .granted)
                }
            case .waitsForEndpoint(let waiter):
                metrics.endpointConcurrencyLimited(waiter.scope)
                if case .reservation(let notify) = waiter.party { notify(.waitsForEndpoint) }
            }
        }
    }

    private func countWait(_ stage: SlotQueues<Waiter>.Stage, of key: DeliveryScope) {
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
        let answer = state.withLock { state -> (SlotQueues<Waiter>.Stage, UInt64) in
            if state.takeBothIfFree(key, lane: lane, appLimit: appLimit) { return (.granted, 0) }
            let id = state.nextID()
            let waiter = Waiter(id: id, scope: key, lane: lane, party: .reservation(notify))
            return (state.enter(waiter, appLimit: appLimit), id)
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
        let (withdrawn, actions) = state.withLock { $0.withdraw(tickets) }
        carryOut(actions)
        return Set(withdrawn.map(\.id))
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
        let id: UInt64? = state.withLock { state in
            if state.takeBothIfFree(key, lane: lane, appLimit: appLimit) { return nil }
            return state.nextID()
        }
        guard let id else { return .granted }
        if let deadline, deadline <= .now { return .timedOut }
        parking?.park()
        defer { parking?.unpark() }
        let timer = Locked<Task<Void, Never>?>(nil)
        defer { timer.withLock { $0 }?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<SlotWait, Never>) in
                let waiter = Waiter(id: id, scope: key, lane: lane, party: .task(continuation))
                let stage = state.withLock { state -> SlotQueues<Waiter>.Stage? in
                    // The cancellation flag is set before the handler runs: checking it under the lock closes the race.
                    if Task.isCancelled { return nil }
                    return state.enter(waiter, appLimit: appLimit)
                }
                guard let stage else { return continuation.resume(returning: .cancelled) }
                countWait(stage, of: key)
                if case .granted = stage { return continuation.resume(returning: .granted) }
                guard let deadline else { return }
                timer.withLock {
                    $0 = Task { [self] in
                        guard (try? await Task.sleep(until: deadline)) != nil else { return }
                        takeOut(id, of: key)?.resumeTask(.timedOut)
                    }
                }
            }
        } onCancel: {
            takeOut(id, of: key)?.resumeTask(.cancelled)
        }
    }

    /// Takes a waiting `acquire` out of the queue it is in (giving back the app slot it holds if it waited for its
    /// endpoint); nil when it is in none (granted, or taken out already).
    private func takeOut(_ id: UInt64, of key: DeliveryScope) -> Waiter? {
        guard let (waiter, actions) = state.withLock({ $0.remove(id, of: key) }) else { return nil }
        carryOut(actions)
        return waiter
    }

    /// Frees a slot: hands it (and its endpoint's) to the next waiters, if any.
    func release(_ key: DeliveryScope) {
        carryOut(state.withLock { $0.release(key) })
    }

    /// Requests running in that scope, for tests.
    func running(_ scope: DeliveryScope) -> Int {
        state.withLock { $0.running(scope) }
    }

    /// Requests running in that endpoint, for tests.
    func running(endpoint: String) -> Int {
        state.withLock { $0.running(endpoint: endpoint) }
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
    enum Change: Sendable {
        case parked
        case unparked
        /// The job waits for a retry in its task: the next job of its Kafka key may start (see `PipelineStateMachine.releaseKey(of:)`).
        case keyReleased
    }

    private let waiting = Mutex(0)
    private let owner: any JobParkingOwner

    init(owner: any JobParkingOwner) {
        self.owner = owner
    }

    func releaseKey() { owner.parkingChanged(.keyReleased) }

    // Told under the lock so a park and an unpark of one job reach the pipeline in order.
    func park() {
        waiting.withLock { count in
            count += 1
            if count == 1 { owner.parkingChanged(.parked) }
        }
    }

    func unpark() {
        waiting.withLock { count in
            count -= 1
            if count == 0 { owner.parkingChanged(.unparked) }
        }
    }
}

/// Whom a job's `JobParking` tells of its changes: the pipeline's record of the started job.
protocol JobParkingOwner: AnyObject, Sendable {
    func parkingChanged(_ change: JobParking.Change)
}

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
/// for either. The pipeline keeps the queues under its own lock (`SlotQueuesHost`), so a job's
/// admission, its slots and its parking change together.
public final class AppConcurrencyLimits: Sendable {
    struct Waiter: SlotWaiter, Sendable {
        let id: UInt64
        let scope: DeliveryScope
        let lane: Lane
        /// Who waits: a task, resumed once the lock is released, or a reservation, taken in by the queues' host under it.
        let party: Party

        /// Resumes a task taken out of its queue without its slots (a reservation taken out is its host's to handle).
        func resumeTask(_ wait: SlotWaitEnd) {
            if case .task(let continuation) = party { continuation.resume(returning: wait) }
        }
    }

    enum Party: Sendable {
        /// A job waiting as a value before its task exists (`reserve`): the host of the queues takes its turns in
        /// under the same lock (`SlotQueuesHost`).
        case reservation
        /// A task suspended in `acquire`.
        case task(CheckedContinuation<SlotWaitEnd, Never>)
    }

    typealias Queues = SlotQueues<Waiter>
    typealias Turn = Queues.Action

    /// The answer to `reserve`.
    enum Reservation {
        /// Both slots are held now.
        case granted(SlotPermit)
        /// The app's slot is not free: the job waits in its queue as `ticket`.
        case waitingForApp(ticket: UInt64)
        /// The app's slot is held, the endpoint's is not free: the job waits in the endpoint's queue as `ticket`.
        case waitingForEndpoint(ticket: UInt64)
    }

    public let limit: Int
    private let endpointLimit: LaneCapacity?
    private let metrics: PipelineMetrics
    private let host = AtomicLazyReference<HostReference>()

    /// - Parameter endpointLimit: slots per endpoint, of which normal requests leave a tenth (at least one) to urgent
    ///   ones, as the transport leaves a tenth of its streams; nil: scopes share none.
    public init(limit: Int, endpointLimit: Int? = nil, metrics: PipelineMetrics) {
        self.limit = max(1, limit)
        self.endpointLimit = endpointLimit.map { LaneCapacity(total: $0) }
        self.metrics = metrics
    }

    /// Empty queues for a host to keep.
    func makeQueues() -> Queues { Queues(endpointLimit: endpointLimit) }

    /// Keeps the queues under `host`'s lock from now on. Called once, before any slot is asked for (the pipeline, as it
    /// is made): without it the queues have a lock of their own.
    func keepQueues(in host: some SlotQueuesHost) {
        let reference = HostReference(pipeline: host, endpointLimit: endpointLimit)
        precondition(self.host.storeIfNil(reference) === reference, "the app slot queues already have a host")
    }

    private var queuesHost: HostReference {
        if let host = host.load() { return host }
        return host.storeIfNil(HostReference(own: OwnLock(makeQueues())))
    }

    /// Runs `change` under the queues' lock, then carries out the turns of the waiters it moved on.
    private func withQueues<Result>(_ change: (inout Queues) -> (Result, [Turn])) -> Result {
        let (result, turns) = queuesHost.withQueues(change)
        carryOut(turns)
        return result
    }

    /// Resumes the tasks granted their slots and counts the waits moved on to an endpoint; a reservation's grant was
    /// taken in by the host under its lock.
    func carryOut(_ turns: [Turn]) {
        for turn in turns {
            switch turn {
            case .granted(let waiter):
                if case .task(let continuation) = waiter.party { continuation.resume(returning: .granted) }
            case .waitsForEndpoint(let waiter):
                metrics.endpointConcurrencyLimited(waiter.scope)
            }
        }
    }

    private func limit(of key: DeliveryScope) -> Int { key.inFlightLimit.map { max(1, $0) } ?? limit }

    /// Counts a request that had to wait.
    func countWait(_ stage: Queues.Stage, of key: DeliveryScope) {
        switch stage {
        case .granted: break
        case .waitingForApp: metrics.appConcurrencyLimited(key)
        case .waitingForEndpoint: metrics.endpointConcurrencyLimited(key)
        }
    }

    /// Under the host's lock, for a job that has no task yet: takes a slot of `key` (and of its endpoint) if free, or
    /// queues the job, whose turns the host takes in as they come. Never suspends, counts nothing (`countWait`).
    func reserve(_ key: DeliveryScope, lane: Lane, in queues: inout Queues) -> Reservation {
        let appLimit = limit(of: key)
        if queues.takeBothIfFree(key, lane: lane, appLimit: appLimit) { return .granted(SlotPermit(scope: key)) }
        let ticket = queues.nextID()
        switch queues.enter(Waiter(id: ticket, scope: key, lane: lane, party: .reservation), appLimit: appLimit) {
        case .granted: return .granted(SlotPermit(scope: key))
        case .waitingForApp: return .waitingForApp(ticket: ticket)
        case .waitingForEndpoint: return .waitingForEndpoint(ticket: ticket)
        }
    }

    /// Under the host's lock: the slots of a reservation granted its turn.
    func permit(grantedTo waiter: Waiter) -> SlotPermit { SlotPermit(scope: waiter.scope) }

    /// Frees the permit's slots unless a send took it over, and empties `permit`. Never under the queues' host's lock
    /// (`Queues.release` is for that).
    func giveBack(_ permit: inout SlotPermit?) {
        guard let permit = permit.take() else { return }
        release(permit.scope)
    }

    /// How a wait for a slot ended.
    enum SlotWaitEnd: Sendable, Equatable {
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
    func acquire(_ key: DeliveryScope, lane: Lane, parking: JobParking?, until deadline: ContinuousClock.Instant?) async -> SlotWaitEnd {
        let appLimit = limit(of: key)
        let id: UInt64? = withQueues { queues in
            (queues.takeBothIfFree(key, lane: lane, appLimit: appLimit) ? nil : queues.nextID(), [])
        }
        guard let id else { return .granted }
        if let deadline, deadline <= .now { return .timedOut }
        parking?.park()
        defer { parking?.unpark() }
        let timer = Locked<Task<Void, Never>?>(nil)
        defer { timer.withLock { $0 }?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<SlotWaitEnd, Never>) in
                let waiter = Waiter(id: id, scope: key, lane: lane, party: .task(continuation))
                let stage = withQueues { queues -> (Queues.Stage?, [Turn]) in
                    // The cancellation flag is set before the handler runs: checking it under the lock closes the race.
                    if Task.isCancelled { return (nil, []) }
                    return (queues.enter(waiter, appLimit: appLimit), [])
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
        withQueues { queues in
            guard let (waiter, turns) = queues.remove(id, of: key) else { return (nil, []) }
            return (waiter, turns)
        }
    }

    /// Frees a slot: hands it (and its endpoint's) to the next waiters, if any.
    func release(_ key: DeliveryScope) {
        withQueues { queues in ((), queues.release(key)) }
    }

    /// Requests running in that scope, for tests.
    func running(_ scope: DeliveryScope) -> Int {
        withQueues { queues in (queues.running(scope), []) }
    }

    /// Requests running in that endpoint, for tests.
    func running(endpoint: String) -> Int {
        withQueues { queues in (queues.running(endpoint: endpoint), []) }
    }

    /// The queues' host, for `AtomicLazyReference`, which keeps objects of one class. A pipeline is held weakly (it holds
    /// these limits); once it is gone, what is left is changed in empty queues, where every slot is free.
    private final class HostReference: Sendable {
        private let own: OwnLock?
        private weak let pipeline: (any SlotQueuesHost)?
        private let endpointLimit: LaneCapacity?

        init(own: OwnLock) {
            self.own = own
            pipeline = nil
            endpointLimit = nil
        }

        init(pipeline: some SlotQueuesHost, endpointLimit: LaneCapacity?) {
            own = nil
            self.pipeline = pipeline
            self.endpointLimit = endpointLimit
        }

        func withQueues<Result>(_ change: (inout Queues) -> (Result, [Turn])) -> (Result, [Turn]) {
            if let host = own ?? pipeline { return host.withQueues(change) }
            var queues = Queues(endpointLimit: endpointLimit)
            return change(&queues)
        }
    }

    /// The queues under a lock of their own, with no reservations (no pipeline runs).
    private final class OwnLock: SlotQueuesHost {
        let queues: Locked<Queues>

        init(_ queues: Queues) { self.queues = Locked(queues) }

        func withQueues<Result>(_ change: (inout Queues) -> (Result, [Turn])) -> (Result, [Turn]) {
            queues.withLock { change(&$0) }
        }
    }
}

/// Where the app slot queues are kept: the pipeline keeps them under its own lock, so a job that waits for its slots as a
/// value (`AppConcurrencyLimits.reserve`) is queued, registered and parked in one hold of it, and its turn (granted, or
/// moved on to its endpoint) is taken in under the same hold as the release that gave it.
protocol SlotQueuesHost: AnyObject, Sendable {
    /// Runs `change` under the host's lock and takes in the reservations' turns among those it returns; returns its
    /// result and every turn, for `AppConcurrencyLimits.carryOut` once the lock is released.
    func withQueues<Result>(_ change: (inout AppConcurrencyLimits.Queues) -> (Result, [AppConcurrencyLimits.Turn]))
        -> (Result, [AppConcurrencyLimits.Turn])
}

/// The slots of one scope (its app's, and its endpoint's), reserved for a consumed job before its task started: a value
/// with one owner at a time, the job's run (`JobProcessor.Source.slot`), which holds no reference to the pipeline. The
/// job's first send to that scope takes it over (`take(for:)`) and frees the slots when its answer comes, as every send
/// does (`AppConcurrencyLimits.release`); a job that sends nothing to that scope gives it back
/// (`AppConcurrencyLimits.giveBack`). Either empties the owner's optional, so a permit is spent exactly once.
struct SlotPermit: Sendable {
    let scope: DeliveryScope
}

extension Optional where Wrapped == SlotPermit {
    /// For a send to `scope`: true when the permit is that scope's and is now the send's (this optional is left empty);
    /// false when there is none or it is another scope's.
    mutating func take(for scope: DeliveryScope) -> Bool {
        guard case .some(let permit) = self, permit.scope == scope else { return false }
        self = nil
        return true
    }
}

/// Whether a consumed job is parked: some of its targets wait for their app's slot. A parked job stays uncommitted but does not count against the
/// lane's in-flight limit (only against its read-ahead bound), so a stalled app cannot
/// stop the jobs of other apps behind it.
/// The pipeline's record of a started job subclasses it (`parkingChanged`), so a job's parking costs no object of its own.
class JobParking: @unchecked Sendable {
    enum Change: Sendable {
        case parked
        case unparked
        /// The job waits for a retry in its task: the next job of its Kafka key may start (see `PipelineStateMachine.releaseKey(of:)`).
        case keyReleased
    }

    private let waiting = Mutex(0)

    /// Told of each change, in order: the pipeline's record of the job overrides it.
    func parkingChanged(_ change: Change) {}

    func releaseKey() { parkingChanged(.keyReleased) }

    // Told under the lock so a park and an unpark of one job reach the pipeline in order.
    func park() {
        waiting.withLock { count in
            count += 1
            if count == 1 { parkingChanged(.parked) }
        }
    }

    func unpark() {
        waiting.withLock { count in
            count -= 1
            if count == 0 { parkingChanged(.unparked) }
        }
    }
}

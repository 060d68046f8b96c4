import PushCore

/// What `SlotQueues` needs to know of a waiter.
protocol SlotWaiter {
    var id: UInt64 { get }
    var scope: DeliveryScope { get }
    var lane: Lane { get }
}

/// The app slots and endpoint slots of `AppConcurrencyLimits` as one value, with no locks, no I/O and no
/// closures: events in (a request asks for its slots, frees them, leaves its queue), actions out (the waiters
/// it moved on, for the caller to take in or tell).
///
/// A request takes its app's (scope's) slot and then, when its scope shares an endpoint, the endpoint's. Each
/// queue is urgent first, then oldest first; normal requests leave the endpoint's reserved part to urgent ones
/// (`LaneCapacity`). A request that holds its app's slot and waits for its endpoint's keeps the app's slot.
/// Scopes and endpoints are forgotten as soon as nothing runs or waits in them, so the maps keyed by them hold
/// at most one entry per request running or waiting.
struct SlotQueues<Waiter: SlotWaiter> {
    /// A waiter moved on.
    enum Action {
        /// Both slots are its own now.
        case granted(Waiter)
        /// It got its app's slot and goes on waiting for its endpoint's.
        case waitsForEndpoint(Waiter)
    }

    /// Where a request stands after `enter`.
    enum Stage: Equatable {
        case granted, waitingForApp, waitingForEndpoint
    }

    fileprivate struct Slots {
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

    /// Slots per endpoint; nil: scopes share none.
    let endpointLimit: LaneCapacity?
    private var apps: [DeliveryScope: Slots] = [:]
    private var endpoints: [String: Slots] = [:]
    private var lastID: UInt64 = 0

    init(endpointLimit: LaneCapacity?) {
        self.endpointLimit = endpointLimit
    }

    /// A new waiter id.
    mutating func nextID() -> UInt64 {
        lastID += 1
        return lastID
    }

    /// Takes the app's slot and its endpoint's if both are free; else takes neither.
    mutating func takeBothIfFree(_ scope: DeliveryScope, lane: Lane, appLimit: Int) -> Bool {
        guard (apps[scope]?.running ?? 0) < appLimit else { return false }
        if let endpoint = scope.endpoint, let endpointLimit {
            guard endpoints[endpoint, default: Slots()].takeIfFree(below: endpointLimit.limit(for: lane)) else { return false }
        }
        return apps[scope, default: Slots()].takeIfFree(below: appLimit)
    }

    /// Takes the app's slot and then the endpoint's, or queues the waiter where it has to wait.
    mutating func enter(_ waiter: Waiter, appLimit: Int) -> Stage {
        guard apps[waiter.scope, default: Slots()].takeIfFree(below: appLimit) else {
            apps[waiter.scope]!.waiters.append(waiter, lane: waiter.lane)
            return .waitingForApp
        }
        return enterEndpoint(waiter) ? .granted : .waitingForEndpoint
    }

    /// Frees both slots of a request of `scope`: the endpoint's first (its next waiter holds its app slot already),
    /// then the app's, whose next waiter goes on to the endpoint.
    mutating func release(_ scope: DeliveryScope) -> [Action] {
        var actions: [Action] = []
        if let endpoint = scope.endpoint { releaseEndpoint(endpoint, actions: &actions) }
        releaseApp(scope, actions: &actions)
        return actions
    }

    /// Takes the waiter `id` of `scope` out of the queue it is in, giving back the app slot it holds if it waited
    /// for its endpoint; nil when it is in none (granted, or taken out already).
    mutating func remove(_ id: UInt64, of scope: DeliveryScope) -> (waiter: Waiter, actions: [Action])? {
        if apps[scope] != nil, let waiter = apps[scope]!.waiters.remove(where: { $0.id == id }) {
            if apps[scope]!.isIdle { apps[scope] = nil }
            return (waiter, [])
        }
        guard let endpoint = scope.endpoint, endpoints[endpoint] != nil,
            let waiter = endpoints[endpoint]!.waiters.remove(where: { $0.id == id })
        else { return nil }
        if endpoints[endpoint]!.isIdle { endpoints[endpoint] = nil }
        var actions: [Action] = []
        releaseApp(scope, actions: &actions)
        return (waiter, actions)
    }

    /// Takes these waiters out of their queues, wherever they wait; returns those that were still waiting. One that
    /// waited for its endpoint gives its app slot back.
    mutating func withdraw(_ ids: Set<UInt64>) -> (withdrawn: [Waiter], actions: [Action]) {
        var withdrawn: [Waiter] = []
        var actions: [Action] = []
        // App queues first: a slot given back below must not go to a waiter withdrawn with it.
        for scope in Array(apps.keys) {
            withdrawn += apps[scope]!.waiters.removeAll(where: { ids.contains($0.id) })
            if apps[scope]!.isIdle { apps[scope] = nil }
        }
        for endpoint in Array(endpoints.keys) {
            let leaving = endpoints[endpoint]!.waiters.removeAll(where: { ids.contains($0.id) })
            if endpoints[endpoint]!.isIdle { endpoints[endpoint] = nil }
            for waiter in leaving {
                withdrawn.append(waiter)
                releaseApp(waiter.scope, actions: &actions)
            }
        }
        return (withdrawn, actions)
    }

    /// Requests running in that scope.
    func running(_ scope: DeliveryScope) -> Int { apps[scope]?.running ?? 0 }

    /// Requests running in that endpoint.
    func running(endpoint: String) -> Int { endpoints[endpoint]?.running ?? 0 }

    /// Scopes and endpoints with a request running or waiting.
    var trackedKeys: Int { apps.count + endpoints.count }

    /// With the waiter's app slot held: takes its endpoint's slot (true), or queues it there (false).
    private mutating func enterEndpoint(_ waiter: Waiter) -> Bool {
        guard let endpoint = waiter.scope.endpoint, let endpointLimit else { return true }
        if endpoints[endpoint, default: Slots()].takeIfFree(below: endpointLimit.limit(for: waiter.lane)) { return true }
        endpoints[endpoint]!.waiters.append(waiter, lane: waiter.lane)
        return false
    }

    /// Frees an app slot of `scope`: its next waiter takes it and goes on to its endpoint.
    private mutating func releaseApp(_ scope: DeliveryScope, actions: inout [Action]) {
        // Mutated in place, one lookup: a copy of the queues out of the dictionary would copy every waiter.
        guard let index = apps.index(forKey: scope) else { return }
        let next = apps.values[index].handOver()
        if apps.values[index].isIdle { apps.remove(at: index) }
        guard let next else { return }
        actions.append(enterEndpoint(next) ? .granted(next) : .waitsForEndpoint(next))
    }

    /// Frees an endpoint slot: its next waiter (which holds its app slot) takes it.
    private mutating func releaseEndpoint(_ endpoint: String, actions: inout [Action]) {
        guard let endpointLimit, let index = endpoints.index(forKey: endpoint) else { return }
        let next = endpoints.values[index].handOver(
            normalAllowed: endpointLimit.hasRoom(for: .normal, used: endpoints.values[index].running - 1))
        if endpoints.values[index].isIdle { endpoints.remove(at: index) }
        if let next { actions.append(.granted(next)) }
    }
}

extension SlotQueues: Sendable where Waiter: Sendable {}
extension SlotQueues.Slots: Sendable where Waiter: Sendable {}

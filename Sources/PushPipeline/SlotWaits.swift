/// The started jobs whose app slot (and endpoint slot) is reserved before their task exists, from their start
/// until the slots are handed to them or they are withdrawn; a value with no locks and no I/O.
///
/// The pipeline reserves outside its own lock (the slot queues have a lock of their own, never taken inside the
/// pipeline's), so a reservation's notices, which come on whichever thread freed a slot, may arrive before the
/// pipeline registered the job's wait. Jobs between their start and that registration are `reserving`; a notice
/// for one of them is kept and taken into account when the wait is registered. An app-slot notice for any other
/// job that has no wait is a late one (its grant came first on another thread) and changes nothing.
struct SlotWaits<ID: Hashable, Wait, Slot> {
    /// What a reservation is told after it had to wait.
    enum Notice {
        /// The app's slot is held; the job waits on for its endpoint's.
        case appSlotGranted
        /// Both slots are the job's.
        case granted(Slot)
    }

    /// Where a reservation that had to wait stands once registered.
    enum Registration {
        /// It waits for its app's slot: the job is parked (it holds none of the lane's capacity).
        case waitingForApp
        /// It holds its app's slot and waits for its endpoint's, in flight.
        case waitingForEndpoint
        /// Its slots were handed over before it was registered: the job starts now; nothing is registered.
        case granted(Slot)
    }

    /// What the pipeline does on a notice.
    enum Action {
        /// The job waits on, for its endpoint's slot, no longer parked.
        case unpark
        /// The job's wait ended with both slots: it starts (it was parked until now, or waited in flight).
        case start(Wait, Slot)
        /// Nothing now: the notice is kept for the registration, or came late.
        case none
        /// A grant for a job with no wait and no reservation under way. Every wait leaves by its grant or by a
        /// withdrawal that found it still queued, so this does not happen; should it, the slots go back rather
        /// than stay held for good.
        case giveBack(Slot)
    }

    private var waits: [ID: Wait] = [:]
    /// Started and not yet registered, with the notices that came for them meanwhile (nil: none yet).
    private var reserving: [ID: Notice?] = [:]

    /// Registered waits.
    var count: Int { waits.count }

    /// The job is about to reserve its slots: a notice that comes before `register` is kept.
    mutating func reserve(_ id: ID) {
        reserving[id] = .some(nil)
    }

    /// The reservation took both slots at once: nothing waits.
    mutating func grantedAtOnce(_ id: ID) {
        reserving[id] = nil
    }

    /// The reservation waits (for its app's slot, or `forEndpoint` only): registers it, unless a notice that came
    /// first moved it on.
    mutating func register(_ id: ID, _ wait: Wait, forEndpoint: Bool) -> Registration {
        let early = reserving.removeValue(forKey: id) ?? nil
        switch early {
        case .granted(let slot): return .granted(slot)
        case .appSlotGranted:
            waits[id] = wait
            return .waitingForEndpoint
        case nil:
            waits[id] = wait
            return forEndpoint ? .waitingForEndpoint : .waitingForApp
        }
    }

    /// A notice of the job's reservation.
    mutating func notice(_ notice: Notice, for id: ID) -> Action {
        if let pending = reserving[id] {
            // A grant is the last notice; an app slot granted after it is the late one.
            if case .granted = pending { return .none }
            reserving[id] = notice
            return .none
        }
        switch notice {
        case .appSlotGranted: return waits[id] == nil ? .none : .unpark
        case .granted(let slot):
            guard let wait = waits.removeValue(forKey: id) else { return .giveBack(slot) }
            return .start(wait, slot)
        }
    }

    /// The registered waits that match.
    func waits(where matches: (ID, Wait) -> Bool) -> [ID: Wait] { waits.filter { matches($0.key, $0.value) } }

    /// These waits were taken out of the slot queues (withdrawn): no notice will come for them.
    mutating func withdrawn(_ ids: some Sequence<ID>) {
        for id in ids { waits[id] = nil }
    }
}

extension SlotWaits: Sendable where ID: Sendable, Wait: Sendable, Slot: Sendable {}
extension SlotWaits.Notice: Sendable where Slot: Sendable {}

import PushCore
import PushKafka

/// Consumed jobs from their consumption to their tasks, as one value with no locks and no I/O: the state machine
/// (`PipelineStateMachine`: capacity, per-key order, offsets and each lane's lifecycle) and the app and endpoint slot
/// queues (`AppConcurrencyLimits`) as its sub-machine. The pipeline keeps it under one lock, feeds it events (a batch
/// consumed, a job parked or ended, slots released, a stop) and carries out the `Actions` each leaves once the lock is
/// released.
///
/// A job with one target reserves its app's slot and its endpoint's before its task exists. When its app's slot is
/// taken it waits for it as a value and is parked (it holds none of the lane's capacity, which may let further jobs
/// start); when only its endpoint's is taken it waits as a value too, in flight. A reservation's turn moves it on:
/// parked no more once it holds its app's slot, launched with its `SlotPermit` once it holds both. A job waiting past
/// `longestSlotWait` is launched without one: its first send takes a slot only if one is free.
struct JobAdmission {
    typealias Machine = PipelineStateMachine<JobProcessor.AdmittedJob>

    /// A job to start a task for.
    struct Launch {
        let id: Machine.JobID
        let admitted: JobProcessor.AdmittedJob
        /// The slots its first send holds, if it reserved them.
        let slot: SlotPermit?
        /// It waited for its slots its longest already: its first send takes one only if one is free.
        let slotWaitSpent: Bool
    }

    /// A job's end, handed in by its last step.
    struct Ending: Sendable {
        let id: Machine.JobID
        /// Its outcomes were acknowledged; false: it was abandoned (uncommitted, redelivered).
        let completed: Bool
    }

    /// What an event leaves to do.
    struct Actions {
        var launches: [Launch] = []
        /// Turns of the slot queues, for `AppConcurrencyLimits.carryOut` (a reservation's was taken in already).
        var turns: [AppConcurrencyLimits.Turn] = []
        /// Jobs that had to wait for a slot, to count.
        var waited: [(stage: AppConcurrencyLimits.Queues.Stage, scope: DeliveryScope)] = []
        /// Lanes whose consumer thread is to be woken (`ConsumerWait`).
        var woken = Set<Lane>()
    }

    /// What a lane's consumer thread waits for while it does not poll.
    enum ConsumerWait {
        /// Room for a batch: woken once the lane has room for `refillBatch` jobs, or for any once fewer than that of its
        /// jobs run (no batch's worth of endings is coming). One wake-up and one poll per batch, not per job.
        case room
        /// A revocation's or a drain's running jobs: woken by the next ending or park.
        case jobs
    }

    /// A lane out of room polls again once it has room for this many jobs (or for any, once fewer than this many of its
    /// jobs run), not at every ending: one wake-up and one poll per batch rather than per job.
    static let refillBatch = 64

    /// A launched job waiting for its app's or endpoint's slot before its task exists.
    struct WaitingForSlot {
        let id: Machine.JobID
        /// When it stops waiting and is launched anyway (`longestSlotWait` after it started waiting).
        let until: ContinuousClock.Instant
        let admitted: JobProcessor.AdmittedJob
        /// It waits for its app's slot (it holds none of the lane's capacity), not for its endpoint's only.
        var parked: Bool
    }

    private(set) var machine: Machine
    /// The app and endpoint slot queues; `AppConcurrencyLimits` changes them through the pipeline (`SlotQueuesHost`).
    var slots: AppConcurrencyLimits.Queues
    /// Jobs waiting for their slots, by their ticket in `slots`.
    private(set) var waitingForSlot: [UInt64: WaitingForSlot] = [:]
    /// Offsets the state machine let go, per lane, for the lane's consumer thread to store (`takeOffsetsToStore`): the
    /// only thread that stores the lane's offsets, so they reach the source in order.
    private var offsetsToStore = PerLane(Lane.allCases) { _ in [TopicPartition: Int64]() }
    /// What each lane's consumer thread waits for, if it waits.
    private var consumerWaits = PerLane(Lane.allCases) { _ in ConsumerWait?.none }
    private let limits: AppConcurrencyLimits
    private let longestSlotWait: Duration

    init(machine: Machine, limits: AppConcurrencyLimits, longestSlotWait: Duration) {
        self.machine = machine
        self.limits = limits
        self.longestSlotWait = longestSlotWait
        slots = limits.makeQueues()
    }

    // MARK: - Events

    /// A lane consumed these jobs, in order (`PipelineStateMachine.consumed`).
    mutating func consumed(_ jobs: [JobProcessor.AdmittedJob], in lane: Lane, at now: Int64, _ actions: inout Actions) {
        admit(machine.consumed(jobs, in: lane, at: now), turns: [], &actions)
    }

    /// Jobs ended: `completed` when their outcomes were acknowledged, false when they were abandoned.
    mutating func ended(_ jobs: some Sequence<Ending>, _ actions: inout Actions) {
        var machineActions: [Machine.Action] = []
        for job in jobs { machineActions += machine.finished(job.id, completed: job.completed) }
        wakeWaiting(&actions)
        admit(machineActions, turns: [], &actions)
    }

    /// A running job's task started or stopped waiting for a slot (`PipelineStateMachine.parkingChanged`).
    mutating func parkingChanged(_ id: Machine.JobID, parked: Bool, _ actions: inout Actions) {
        let machineActions = machine.parkingChanged(id, parked: parked)
        if parked { wakeWaiting(&actions) }
        admit(machineActions, turns: [], &actions)
    }

    /// A running job waits for a retry in its task: its key goes to the key's next job (`PipelineStateMachine.releaseKey`).
    mutating func releaseKey(of id: Machine.JobID, _ actions: inout Actions) {
        admit(machine.releaseKey(of: id), turns: [], &actions)
    }

    /// The slot queues changed (a send's slots released, a task's wait entered or left): their turns move on.
    mutating func slotsChanged(_ turns: [AppConcurrencyLimits.Turn], _ actions: inout Actions) {
        admit([], turns: turns, &actions)
    }

    /// Launches the lane's jobs that waited for their slots until `now` or longer, without slots: each task's first send
    /// takes one if one is free by then, and is otherwise handed to be retried, so a hung app holds neither the jobs'
    /// keys nor the lane's read-ahead for longer than `longestSlotWait`.
    mutating func launchOverdue(in lane: Lane, at now: ContinuousClock.Instant, _ actions: inout Actions) {
        let overdue = waitingForSlot.filter { $0.value.id.lane == lane && $0.value.until <= now }
        guard !overdue.isEmpty else { return }
        let (withdrawn, turns) = slots.withdraw(Set(overdue.keys))
        var starts: [Machine.Action] = []
        for waiter in withdrawn {
            guard let wait = waitingForSlot.removeValue(forKey: waiter.id) else { continue }
            // Being stopped: like jobs withdrawn by the stop, they never sent anything and are redelivered.
            if isStopping(lane) {
                starts += abandon(wait.id, &actions)
                continue
            }
            if wait.parked { starts += machine.parkingChanged(wait.id, parked: false) }
            actions.launches.append(Launch(id: wait.id, admitted: wait.admitted, slot: nil, slotWaitSpent: true))
        }
        admit(starts, turns: turns, &actions)
    }

    /// Gives up the jobs waiting for their slots that match (they never sent anything, so they stay uncommitted and
    /// are redelivered); returns how many.
    mutating func withdrawWaiting(where matches: (WaitingForSlot) -> Bool, _ actions: inout Actions) -> Int {
        let waiting = waitingForSlot.filter { matches($0.value) }
        guard !waiting.isEmpty else { return 0 }
        let (withdrawn, turns) = slots.withdraw(Set(waiting.keys))
        var starts: [Machine.Action] = []
        for waiter in withdrawn {
            guard let wait = waitingForSlot.removeValue(forKey: waiter.id) else { continue }
            starts += abandon(wait.id, &actions)
        }
        admit(starts, turns: turns, &actions)
        return withdrawn.count
    }

    /// Nothing new starts: jobs queued or waiting for their slots are given up (uncommitted, redelivered); returns how many.
    mutating func stop(_ actions: inout Actions) -> Int {
        machine.stop() + withdrawWaiting(where: { _ in true }, &actions)
    }

    /// The offsets left to store in the lane (a later offset of a partition replaced an earlier one), now taken.
    mutating func takeOffsetsToStore(in lane: Lane) -> [TopicPartition: Int64] {
        offsetsToStore.update(lane) { offsets in
            defer { offsets = [:] }
            return offsets
        } ?? [:]
    }

    /// Partitions were assigned to the lane (`PipelineStateMachine.assigned`).
    mutating func assigned(_ partitions: [TopicPartition], in lane: Lane) { machine.assigned(partitions, in: lane) }

    /// Partitions are about to be taken away: their queued jobs, and those waiting for their slots, are given up.
    /// Returns how many of their jobs still run (`PipelineStateMachine.revoking`).
    mutating func revoking(_ partitions: [TopicPartition], in lane: Lane, _ actions: inout Actions) -> Int {
        _ = machine.revoking(partitions, in: lane)
        let revoked = Set(partitions)
        _ = withdrawWaiting(where: { $0.id.lane == lane && revoked.contains($0.admitted.message.topicPartition) }, &actions)
        return machine.running(in: lane, partitions: partitions)
    }

    /// The revocation goes ahead; returns how many of the partitions' jobs were still running (`PipelineStateMachine.revoked`).
    mutating func revoked(_ partitions: [TopicPartition], in lane: Lane) -> Int { machine.revoked(partitions, in: lane) }

    // MARK: - Admission

    /// Whether the lane is being stopped: a job let go now does not queue for its slots, and slots granted now go back.
    func isStopping(_ lane: Lane) -> Bool { machine.lifecycle(of: lane).map { $0 >= .stopping } ?? true }

    /// Launches the jobs the state machine let go and takes in the slot queues' turns, until neither leaves anything more.
    private mutating func admit(_ machineActions: [Machine.Action], turns: [AppConcurrencyLimits.Turn], _ actions: inout Actions) {
        var starts = take(machineActions, &actions)
        var turns = turns
        var waitUntil: ContinuousClock.Instant?
        while !starts.isEmpty || !turns.isEmpty {
            let taking = turns
            turns = []
            for turn in taking {
                actions.turns.append(turn)
                switch turn {
                case .granted(let waiter):
                    guard case .reservation = waiter.party else { continue }
                    // A reservation that waits is registered in the event that queued it; one that is not (or whose lane
                    // is being stopped) gives its slots back rather than hold them for good.
                    let registered = waitingForSlot.removeValue(forKey: waiter.id)
                    guard let wait = registered, !isStopping(wait.id.lane) else {
                        turns += slots.release(waiter.scope)
                        if let registered { starts += take(abandon(registered.id, &actions), &actions) }
                        continue
                    }
                    if wait.parked { starts += take(machine.parkingChanged(wait.id, parked: false), &actions) }
                    actions.launches.append(
                        Launch(id: wait.id, admitted: wait.admitted, slot: limits.permit(grantedTo: waiter), slotWaitSpent: false))
                case .waitsForEndpoint(let waiter):
                    guard case .reservation = waiter.party, let wait = waitingForSlot[waiter.id], wait.parked, !isStopping(wait.id.lane)
                    else { continue }
                    // Waits on for the provider's capacity, in flight (not parked), as a value.
                    waitingForSlot[waiter.id]!.parked = false
                    starts += take(machine.parkingChanged(wait.id, parked: false), &actions)
                }
            }
            let starting = starts
            starts = []
            for (id, admitted) in starting {
                guard let scope = admitted.scope else {
                    actions.launches.append(Launch(id: id, admitted: admitted, slot: nil, slotWaitSpent: false))
                    continue
                }
                // A lane being stopped starts nothing more that would take a slot: such a job never sent anything and
                // is redelivered.
                guard !isStopping(id.lane) else {
                    starts += take(abandon(id, &actions), &actions)
                    continue
                }
                switch limits.reserve(scope, lane: admitted.deliveryLane, in: &slots) {
                case .granted(let permit):
                    actions.launches.append(Launch(id: id, admitted: admitted, slot: permit, slotWaitSpent: false))
                case .waitingForApp(let ticket):
                    actions.waited.append((.waitingForApp, scope))
                    if waitUntil == nil { waitUntil = .now + longestSlotWait }
                    waitingForSlot[ticket] = WaitingForSlot(id: id, until: waitUntil!, admitted: admitted, parked: true)
                    starts += take(machine.parkingChanged(id, parked: true), &actions)
                    wakeWaiting(&actions)
                case .waitingForEndpoint(let ticket):
                    actions.waited.append((.waitingForEndpoint, scope))
                    if waitUntil == nil { waitUntil = .now + longestSlotWait }
                    waitingForSlot[ticket] = WaitingForSlot(id: id, until: waitUntil!, admitted: admitted, parked: false)
                }
            }
        }
    }

    /// The job ends unfinished (it never sent anything, and is redelivered); returns what the state machine then lets go.
    private mutating func abandon(_ id: Machine.JobID, _ actions: inout Actions) -> [Machine.Action] {
        let machineActions = machine.finished(id, completed: false)
        wakeWaiting(&actions)
        return machineActions
    }

    /// The lane's consumer thread is about to wait for `wait` (under the same lock as the events that end it).
    mutating func consumer(in lane: Lane, waitsFor wait: ConsumerWait) { consumerWaits[lane] = wait }

    /// Wakes the lanes whose consumer thread waits and may go on. Capacity is shared, so an ending in one lane may free
    /// room in the other.
    private mutating func wakeWaiting(_ actions: inout Actions) {
        for lane in Lane.allCases {
            switch consumerWaits[lane] ?? nil {
            case nil: continue
            case .jobs: break
            case .room:
                let room = machine.room(in: lane)
                guard room >= Self.refillBatch || (room > 0 && machine.running(in: lane) < Self.refillBatch) else { continue }
            }
            consumerWaits[lane] = .some(nil)
            actions.woken.insert(lane)
        }
    }

    /// Keeps the offsets among the state machine's actions for their lane's consumer thread; returns the jobs to start.
    private mutating func take(_ machineActions: [Machine.Action], _ actions: inout Actions) -> [(Machine.JobID, JobProcessor.AdmittedJob)]
    {
        var starts: [(Machine.JobID, JobProcessor.AdmittedJob)] = []
        for action in machineActions {
            switch action {
            case .start(let id, let admitted): starts.append((id, admitted))
            case .storeOffset(let lane, let topicPartition, let offset): offsetsToStore[lane]?[topicPartition] = offset
            }
        }
        return starts
    }
}

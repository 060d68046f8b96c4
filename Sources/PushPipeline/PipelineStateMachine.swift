import PushCore
import PushKafka

/// What the pipeline's state machine knows of a consumed job before it starts.
protocol PipelineJob: Sendable {
    var message: KafkaMessage { get }
    /// The app whose share of its lane the job takes; nil when not known (a job that does not decode):
    /// such jobs share one share.
    var tenant: Tenant? { get }
}

/// An app as the lanes share their capacity between apps: the provider and `app` of a job's first target.
/// Taken from the job, so a value from outside: kept only while a job of it is queued or running.
struct Tenant: Hashable, Sendable {
    let provider: ProviderID
    let app: String

    init(provider: ProviderID, app: String) {
        self.provider = provider
        self.app = app
    }

    /// The app of the job's first target; nil for a job without targets.
    init?(of job: Job) {
        guard let target = job.targets.first else { return nil }
        self.init(provider: target.provider, app: target.app ?? "")
    }
}

/// Admission, per-key order and offsets of consumed jobs, as one value with no I/O and no
/// locks: its owner (`JobAdmission`) feeds it events (a batch consumed, a job parked or finished,
/// partitions assigned or revoked, a stop) and carries out the actions it returns.
///
/// A consumed job waits here as a value until it may start: its lane's turn under the
/// in-flight limit (the urgent lane first, with its reserve) and no earlier job of the same
/// Kafka key still queued or running in that lane. A lane consumes what its free capacity
/// could start (jobs parked on an app slot hold none), and at capacity what it needs to find
/// other apps' jobs (see below), within its read-ahead bound (ready, running and parked jobs
/// together). Offsets move per partition over the contiguous run of completed jobs.
///
/// Jobs waiting behind an earlier job of their key take neither capacity nor read-ahead room, so slow
/// keys (users whose push service hangs) never stall the lane: what bounds them is memory. Every job the
/// lane holds counts its bytes (`Limits.cost(of:)`) against `readAheadBytes`; at that bound the lane
/// consumes nothing more, and from half of it the partitions whose keys hold the most bytes behind them
/// are paused, heaviest first, until the partitions still read hold at most a quarter of the bound behind
/// their keys: other users' jobs go on being read while the slow users' partitions wait. Those partitions
/// resume once the lane holds less than a quarter of the bound, or each once its keys hold nothing behind them. When one key has more than
/// `maximumQueuedPerKey` waiting, the partitions that hold them are paused too (`pausedPartitions`, which
/// the lane's consumer thread follows), and the rest flow; they resume once the key's queue is down to half
/// of that. What a stuck key costs is its partition: the jobs behind it in that partition wait, uncommitted.
///
/// Fair sharing between apps (`Tenant`): a lane's in-flight capacity is shared by the apps with jobs
/// running or ready in it, each app's share being the capacity divided by their number. Of the ready
/// jobs, the oldest of an app below its share starts first; the jobs of an app at or over its share
/// are set aside (they wait as values, taking no capacity) while another app's job is ready, and start
/// when no app below its share has one (work-conserving: one app alone uses the whole lane). A lane
/// whose capacity is full and that holds no ready job of an app below its share goes on consuming
/// within its read-ahead bound, so it sees the jobs of other apps behind one app's burst; an app's job
/// it finds there starts at the next free place. Beyond the read-ahead window, Kafka's order within a
/// partition holds: jobs still in the partition behind a burst wait for it.
struct PipelineStateMachine<Job: PipelineJob> {
    struct Limits: Sendable, Equatable {
        /// Jobs running (started, not parked) in both lanes together.
        var maximumInFlight: Int
        /// The part of `maximumInFlight` only the urgent lane may use.
        var urgentReserved: Int
        /// Consumed and unfinished jobs per lane that are not waiting behind their keys.
        var readAhead: Int
        /// Bytes of the jobs a lane holds (`cost(of:)`), all of them, behind their keys or not.
        var readAheadBytes: Int

        /// Jobs of one key waiting behind its running job before the partitions holding them are paused.
        var maximumQueuedPerKey: Int
        /// Whether apps share each lane's capacity (see the type); off, every app's share is the whole lane.
        var sharesBetweenApps: Bool

        /// What a held job is counted as beyond its Kafka key and value: its decoded form and its place in the
        /// machine, about 2 KiB of resident memory per job held (docs/performance.md).
        static var heldJobOverhead: Int { 2048 }

        init(
            maximumInFlight: Int, urgentReserved: Int, readAhead: Int,
            readAheadBytes: Int = PipelineConfiguration.defaultReadAheadBytes, sharesBetweenApps: Bool = true
        ) {
            self.sharesBetweenApps = sharesBetweenApps
            self.maximumInFlight = max(1, maximumInFlight)
            self.urgentReserved = max(0, min(urgentReserved, self.maximumInFlight / 2))
            self.readAhead = max(readAhead, self.maximumInFlight)
            self.readAheadBytes = max(readAheadBytes, Self.heldJobOverhead)
            maximumQueuedPerKey = min(self.readAhead, 2 * self.maximumInFlight)
        }

        init(_ configuration: PipelineConfiguration) {
            self.init(
                maximumInFlight: configuration.maximumInFlightJobs,
                urgentReserved: configuration.effectiveUrgentReservedInFlightJobs, readAhead: configuration.readAheadJobs,
                readAheadBytes: configuration.readAheadBytes, sharesBetweenApps: configuration.sharesLanesBetweenApps)
        }

        /// The bytes a held job counts for: its Kafka key and value, and the overhead.
        static func cost(of message: KafkaMessage) -> Int { message.value.count + (message.key?.count ?? 0) + heldJobOverhead }

        /// From here on the partitions whose keys hold the most bytes are paused.
        var pressureBytes: Int { readAheadBytes / 2 }
    }

    /// One consumed job, from consumption until it finishes or is given up.
    struct JobID: Hashable, Sendable, CustomStringConvertible {
        let lane: Lane
        let sequence: UInt64
        var description: String { "\(lane.rawValue)#\(sequence)" }
    }

    enum Action: Sendable {
        /// Work on the job now; report `finished` when its outcomes are acknowledged (or it was abandoned).
        case start(JobID, Job)
        /// Store this offset (the next one to consume) of the lane's partition for the next commit.
        case storeOffset(Lane, TopicPartition, Int64)
    }

    private struct Entry {
        let id: JobID
        let job: Job
        let generation: UInt64
        /// When the job's turn came (it became ready): ready jobs start in this order, apps' shares aside.
        var turn: UInt64 = 0

        var message: KafkaMessage { job.message }
        var key: MessageKey? { message.key.map(MessageKey.init) }
        var cost: Int { Limits.cost(of: job.message) }
    }

    /// What one app has in a lane: jobs running and holding capacity, jobs ready (in `ready` or set
    /// aside), and the jobs set aside while it held its share.
    private struct TenantLoad {
        var working = 0
        var ready = 0
        /// Oldest first; older than any job of the app still in `ready`.
        var setAside = FIFOQueue<Entry>()
    }

    /// A Kafka key as a set member: hashed as one run of bytes, where an array of bytes hashes each byte on its own.
    struct MessageKey: Hashable {
        let bytes: [UInt8]

        func hash(into hasher: inout Hasher) { bytes.withUnsafeBytes { hasher.combine(bytes: $0) } }
    }

    private struct LaneState {
        /// The key's job ended: the next job of the key, if any, takes its turn; the key's partitions resume
        /// once its queue fell to half its bound.
        mutating func releaseKey(_ key: MessageKey, limits: Limits) {
            // Moved out and back rather than changed through the dictionary's accessor, which allocates.
            var left = 0
            if var waiting = behind.removeValue(forKey: key), let next = waiting.popFirst() {
                left = waiting.count
                if !waiting.isEmpty { behind[key] = waiting }
                behindCount -= 1
                changeBytesBehind(in: next.message.topicPartition, by: -next.cost)
                makeReady(next)
            } else {
                busyKeys.remove(key)
            }
            if stalled[key] != nil, left <= limits.maximumQueuedPerKey / 2 { unstall(key) }
        }

        /// A job of `key` in `partition` joined the key's queue, now `count` long: past the bound, the partition pauses.
        mutating func noteQueued(_ key: MessageKey, count: Int, in partition: TopicPartition, limits: Limits) {
            guard count > limits.maximumQueuedPerKey, stalled[key]?.contains(partition) != true else { return }
            stalled[key, default: []].insert(partition)
            pausedFor[partition, default: 0] += 1
        }

        /// The key no longer holds partitions paused: those no other key holds resume.
        mutating func unstall(_ key: MessageKey) {
            guard let partitions = stalled.removeValue(forKey: key) else { return }
            for partition in partitions {
                guard let holders = pausedFor[partition] else { continue }
                pausedFor[partition] = holders <= 1 ? nil : holders - 1
            }
        }

        /// A partition whose keys hold nothing behind them any more is no longer paused for memory.
        mutating func changeBytesBehind(in partition: TopicPartition, by change: Int) {
            let bytes = bytesBehind[partition, default: 0] + change
            guard bytes > 0 else {
                bytesBehind[partition] = nil
                if !pausedForMemory.isEmpty { pausedForMemory.remove(partition) }
                return
            }
            bytesBehind[partition] = bytes
        }

        /// Under memory pressure (the lane holds half its bytes bound), pauses the partitions whose keys hold the
        /// most bytes behind them, heaviest first, until those still read hold at most a quarter of the bound behind
        /// their keys; resumes them all once the lane holds less than a quarter, and each one as soon as its keys hold
        /// nothing behind them (`changeBytesBehind`). O(partitions), and only under pressure.
        mutating func balanceHeldBytes(limits: Limits) {
            guard heldBytes >= limits.pressureBytes else {
                if !pausedForMemory.isEmpty, heldBytes < limits.pressureBytes / 2 { pausedForMemory.removeAll() }
                return
            }
            let target = limits.pressureBytes / 2
            var read = 0
            for (partition, bytes) in bytesBehind where !pausedForMemory.contains(partition) { read += bytes }
            guard read > target else { return }
            for (partition, bytes) in bytesBehind.sorted(by: { $0.value > $1.value }) where !pausedForMemory.contains(partition) {
                pausedForMemory.insert(partition)
                read -= bytes
                if read <= target { break }
            }
        }

        /// Partitions leaving the lane: no longer paused for any key (their jobs are redelivered to the next owner).
        mutating func forget(_ partitions: Set<TopicPartition>) {
            pausedForMemory.subtract(partitions)
            for partition in partitions { pausedFor[partition] = nil }
            for key in Array(stalled.keys) {
                stalled[key]!.subtract(partitions)
                if stalled[key]!.isEmpty { stalled[key] = nil }
            }
        }

        /// The job's turn came: it waits in `ready` for capacity.
        mutating func makeReady(_ entry: Entry) {
            var entry = entry
            entry.turn = nextTurn
            nextTurn += 1
            tenants[entry.job.tenant, default: TenantLoad()].ready += 1
            ready.append(entry)
        }

        /// Changes what the app holds, and forgets it once it holds nothing.
        mutating func changeLoad(of tenant: Tenant?, working: Int = 0, ready: Int = 0) {
            guard var load = tenants.removeValue(forKey: tenant) else {
                if working > 0 || ready > 0 { tenants[tenant] = TenantLoad(working: max(working, 0), ready: max(ready, 0)) }
                return
            }
            load.working += working
            load.ready += ready
            if load.working > 0 || load.ready > 0 { tenants[tenant] = load }
        }

        /// Each app's share of `capacity`: split evenly between the apps with jobs running or ready, rounded up;
        /// without `sharing`, the whole of it for any app.
        func share(of capacity: Int, sharing: Bool) -> Int {
            guard sharing else { return Int.max }
            return max(1, (capacity + tenants.count - 1) / max(tenants.count, 1))
        }

        func belowShare(_ tenant: Tenant?, _ share: Int) -> Bool { (tenants[tenant]?.working ?? 0) < share }

        /// Sets aside the jobs at the front of `ready` of apps at or over their share, so that its first job,
        /// if any, is one of an app below its share.
        mutating func setAsideJobsOverShare(_ share: Int) {
            while let front = ready.first, !belowShare(front.job.tenant, share) {
                let entry = ready.popFirst()!
                var load = tenants.removeValue(forKey: entry.job.tenant)!
                load.setAside.append(entry)
                tenants[entry.job.tenant] = load
                setAsideTenants.insert(entry.job.tenant)
            }
        }

        /// The set-aside app whose oldest job is the oldest, among the apps below their share (or among all).
        func oldestSetAside(belowShare share: Int?) -> (tenant: Tenant?, turn: UInt64)? {
            var oldest: (tenant: Tenant?, turn: UInt64)?
            for tenant in setAsideTenants {
                guard let load = tenants[tenant], let head = load.setAside.first else { continue }
                if let share, load.working >= share { continue }
                if oldest == nil || head.turn < oldest!.turn { oldest = (tenant, head.turn) }
            }
            return oldest
        }

        /// The ready job to start next in `capacity`: the oldest of an app below its share; when every app with
        /// a job ready holds its share, the oldest ready job.
        mutating func nextToStart(capacity: Int, sharing: Bool) -> Entry? {
            let share = share(of: capacity, sharing: sharing)
            setAsideJobsOverShare(share)
            let setAside = setAsideTenants.isEmpty ? nil : oldestSetAside(belowShare: share)
            if let front = ready.first, setAside == nil || front.turn < setAside!.turn { return ready.popFirst() }
            guard let (tenant, _) = setAside ?? (setAsideTenants.isEmpty ? nil : oldestSetAside(belowShare: nil)) else { return nil }
            var load = tenants.removeValue(forKey: tenant)!
            let entry = load.setAside.popFirst()
            if load.setAside.isEmpty { setAsideTenants.remove(tenant) }
            tenants[tenant] = load
            return entry
        }

        /// Whether a ready job of an app below its share waits for capacity (`capacity`: the lane's working jobs and free places).
        func readyBelowShare(capacity: Int) -> Bool {
            let share = share(of: capacity, sharing: true)
            if let front = ready.first, belowShare(front.job.tenant, share) { return true }
            return !setAsideTenants.isEmpty && oldestSetAside(belowShare: share) != nil
        }

        /// Ready jobs, `ready` and set aside, oldest turn first; leaves none.
        mutating func takeReady() -> [Entry] {
            var all = ready.removeAll()
            for tenant in setAsideTenants { all += tenants[tenant]?.setAside.removeAll() ?? [] }
            setAsideTenants.removeAll()
            return all.sorted { $0.turn < $1.turn }
        }

        /// Counts each app's working and ready jobs again (after queued jobs were given up).
        mutating func recountTenants() {
            var counted: [Tenant?: TenantLoad] = [:]
            for (sequence, entry) in running where !parked.contains(sequence) {
                counted[entry.job.tenant, default: TenantLoad()].working += 1
            }
            for entry in ready.removeAll() {
                counted[entry.job.tenant, default: TenantLoad()].ready += 1
                ready.append(entry)
            }
            tenants = counted
        }

        var tracker = PartitionCommitPoints()
        /// Jobs whose turn came (no earlier job of their key is unfinished), by turn; see `setAsideJobsOverShare`.
        var ready = FIFOQueue<Entry>()
        var nextTurn: UInt64 = 0
        /// Apps with jobs running (not parked) or ready in the lane: at most one per such job, so bounded by
        /// `readAhead` (ready ones) and the in-flight capacity (running ones).
        var tenants: [Tenant?: TenantLoad] = [:]
        /// Apps with jobs set aside.
        var setAsideTenants = Set<Tenant?>()
        /// Jobs behind an unfinished earlier job of the same key, per key, oldest first.
        var behind: [MessageKey: FIFOQueue<Entry>] = [:]
        /// Keys with a job ready or running: the next job of such a key waits behind it.
        var busyKeys = Set<MessageKey>()
        /// Jobs in `behind`, all keys together.
        var behindCount = 0
        /// Keys whose queue passed `maximumQueuedPerKey`, with the partitions paused for them.
        var stalled: [MessageKey: Set<TopicPartition>] = [:]
        /// Paused partitions, with how many stalled keys hold each.
        var pausedFor: [TopicPartition: Int] = [:]
        /// Bytes (`Limits.cost(of:)`) of every job the lane holds.
        var heldBytes = 0
        /// Bytes of the jobs waiting behind their keys, per partition (none for a partition without such jobs).
        var bytesBehind: [TopicPartition: Int] = [:]
        /// Partitions paused because their keys hold the most of the lane's memory (`balanceHeldBytes`).
        var pausedForMemory = Set<TopicPartition>()
        var running: [UInt64: Entry] = [:]
        var parked = Set<UInt64>()
        /// Running jobs that let their key go before they finished (a retry waiting in the job's task).
        var keyReleased = Set<UInt64>()
        var queued = 0
        var lifecycle = LaneLifecycle.joining

        /// Consumed and unfinished: queued, running and parked.
        var consumed: Int { queued + running.count }
        /// Queued with their turn come (not behind their key).
        var readyCount: Int { queued - behindCount }
        /// Running and not parked: holding in-flight capacity.
        var working: Int { running.count - parked.count }
    }

    /// Where a lane is in its life. It only moves forward.
    enum LaneLifecycle: Comparable, Sendable {
        /// Its consumer reads but has no assignment yet: the worker is not ready.
        case joining
        /// Assigned (an empty assignment counts): it consumes, and starts jobs as capacity allows.
        case consuming
        /// Stopping: it consumes and starts nothing more. Its queued jobs were given up (uncommitted, redelivered);
        /// its running ones finish or are abandoned.
        case stopping
    }

    let limits: Limits
    private var lanes: PerLane<LaneState>
    private var sequence: UInt64 = 0

    init(limits: Limits, lanes: [Lane]) {
        self.limits = limits
        self.lanes = PerLane(lanes) { _ in LaneState() }
    }

    // MARK: - Questions

    /// How many more messages the lane may consume now, within its read-ahead bound (0 while stopping):
    /// what its free capacity could start beyond the jobs it already holds ready; with its capacity full,
    /// as many as the bound allows while no ready job of an app below its share waits, so that it sees
    /// the jobs of other apps behind one app's burst. A lane at capacity that holds such a job leaves the
    /// next messages in librdkafka's prefetch queue. Jobs behind their keys take no room but their own bound's.
    func room(in lane: Lane) -> Int {
        guard let lifecycle = lifecycle(of: lane), lifecycle < .stopping else { return 0 }
        let free = freeCapacity(of: lane)
        let sharing = limits.sharesBetweenApps
        guard
            let (consumed, ready, behind, readsOn) = lanes.read(
                lane,
                { state in
                    (
                        state.consumed, state.readyCount, state.behindCount,
                        free == 0 && sharing && !state.readyBelowShare(capacity: state.working)
                    )
                })
        else { return 0 }
        let capacityRoom = readsOn ? Int.max : free - ready
        // Every message costs at least the overhead: a batch may pass the bytes bound by its messages' own size only.
        let bytesRoom = (limits.readAheadBytes - heldBytes(in: lane)) / Limits.heldJobOverhead
        return max(0, min(limits.readAhead - (consumed - behind), capacityRoom, bytesRoom))
    }

    /// Partitions of the lane to keep paused: for keys whose jobs back up, and for the keys holding the most memory.
    func pausedPartitions(in lane: Lane) -> Set<TopicPartition> {
        lanes.read(lane) { $0.pausedForMemory.union($0.pausedFor.keys) } ?? []
    }

    /// Bytes (`Limits.cost(of:)`) of the jobs the lane holds.
    func heldBytes(in lane: Lane) -> Int { lanes.read(lane) { $0.heldBytes } ?? 0 }

    /// Apps with jobs running or ready in the lane: at most the read-ahead bound plus the in-flight capacity.
    func apps(in lane: Lane) -> Int { lanes.read(lane) { $0.tenants.count } ?? 0 }

    /// Jobs of the lane waiting behind their keys.
    func queuedBehindKeys(in lane: Lane) -> Int { lanes.read(lane) { $0.behindCount } ?? 0 }

    /// Jobs the lane could start now, given what both lanes run.
    private func freeCapacity(of lane: Lane) -> Int {
        let urgent = lanes.read(.urgent) { $0.working } ?? 0
        let normal = lanes.read(.normal) { $0.working } ?? 0
        let reserved = lanes.contains(.urgent) ? limits.urgentReserved : 0
        switch lane {
        case .urgent: return max(reserved - urgent, limits.maximumInFlight - urgent - normal, 0)
        case .normal: return max(limits.maximumInFlight - normal - max(urgent, reserved), 0)
        }
    }

    /// Consumed and unfinished jobs of both lanes.
    var consumed: Int { consumed(in: .normal) + consumed(in: .urgent) }

    func consumed(in lane: Lane) -> Int { lanes.read(lane) { $0.consumed } ?? 0 }

    func queued(in lane: Lane) -> Int { lanes.read(lane) { $0.queued } ?? 0 }

    func running(in lane: Lane) -> Int { lanes.read(lane) { $0.running.count } ?? 0 }

    /// Started and unfinished jobs of both lanes (at most `maximumInFlightJobs`).
    var running: Int { running(in: .normal) + running(in: .urgent) }

    func running(in lane: Lane, partitions: [TopicPartition]) -> Int {
        let revoked = Set(partitions)
        return lanes.read(lane) { $0.running.values.count { revoked.contains($0.message.topicPartition) } } ?? 0
    }

    /// Where the lane is in its life; nil for a lane the pipeline does not run.
    func lifecycle(of lane: Lane) -> LaneLifecycle? { lanes.read(lane) { $0.lifecycle } }

    /// Whether `stop()` was called.
    var stopRequested: Bool { Lane.allCases.contains { lifecycle(of: $0) == .stopping } }

    /// Lanes that have not joined their consumer group yet (an empty assignment counts as joined).
    var lanesNotJoined: [Lane] { [Lane.normal, .urgent].filter { lifecycle(of: $0) == .joining } }

    // MARK: - Events

    /// A lane consumed these messages, in order: each waits for its turn; those whose turn came start.
    /// A message of a partition the lane no longer owns (revoked while its batch was read) is
    /// given up: its new owner gets it.
    /// `now`: the time consumed (ms), which ages the lane's oldest uncommitted offset (`oldestUnfinishedConsumedAt`).
    mutating func consumed(_ jobs: [Job], in lane: Lane, at now: Int64 = 0) -> [Action] {
        guard lanes.contains(lane) else { return [] }
        var sequence = sequence
        let limits = limits
        lanes.update(lane) { state in
            for job in jobs where state.tracker.owns(job.message.topicPartition) {
                let message = job.message
                sequence += 1
                let generation = state.tracker.begin(message.topicPartition, offset: message.offset, at: now)
                let entry = Entry(id: JobID(lane: lane, sequence: sequence), job: job, generation: generation)
                state.queued += 1
                let cost = entry.cost
                state.heldBytes += cost
                if let key = entry.key {
                    if state.busyKeys.contains(key) {
                        var waiting = state.behind.removeValue(forKey: key) ?? FIFOQueue()
                        waiting.append(entry)
                        let count = waiting.count
                        state.behind[key] = waiting
                        state.behindCount += 1
                        state.changeBytesBehind(in: message.topicPartition, by: cost)
                        state.noteQueued(key, count: count, in: message.topicPartition, limits: limits)
                        continue
                    }
                    state.busyKeys.insert(key)
                }
                state.makeReady(entry)
            }
            state.balanceHeldBytes(limits: limits)
        }
        self.sequence = sequence
        return startAdmitted()
    }

    /// A running job started or stopped waiting for an app slot: a parked job holds no in-flight capacity.
    mutating func parkingChanged(_ id: JobID, parked: Bool) -> [Action] {
        let changed = lanes.update(id.lane) { state in
            guard let entry = state.running[id.sequence] else { return false }
            let changed = parked ? state.parked.insert(id.sequence).inserted : state.parked.remove(id.sequence) != nil
            if changed { state.changeLoad(of: entry.job.tenant, working: parked ? -1 : 1) }
            return true
        }
        return changed == true ? startAdmitted() : []
    }

    /// A running job waits for a retry in its own task (no retry queue): its key goes to the key's next job, as a
    /// job handed to the retry queue lets it go, so a cancel of the same user is not held up behind the call it stops.
    mutating func releaseKey(of id: JobID) -> [Action] {
        let limits = limits
        let released = lanes.update(id.lane) { state -> Bool in
            guard let entry = state.running[id.sequence], let key = entry.key, state.keyReleased.insert(id.sequence).inserted else {
                return false
            }
            state.releaseKey(key, limits: limits)
            return true
        }
        return released == true ? startAdmitted() : []
    }

    /// A running job ended: `completed` when its outcomes were acknowledged (its offset may then
    /// be committed), false when it was abandoned (it stays uncommitted and is redelivered).
    mutating func finished(_ id: JobID, completed: Bool) -> [Action] {
        let limits = limits
        let ended = lanes.update(id.lane) { state -> (found: Bool, offset: (TopicPartition, Int64)?) in
            guard let entry = state.running.removeValue(forKey: id.sequence) else { return (false, nil) }
            if state.parked.remove(id.sequence) == nil { state.changeLoad(of: entry.job.tenant, working: -1) }
            if state.keyReleased.remove(id.sequence) == nil, let key = entry.key { state.releaseKey(key, limits: limits) }
            state.heldBytes -= entry.cost
            state.balanceHeldBytes(limits: limits)
            guard completed else { return (true, nil) }
            let topicPartition = entry.message.topicPartition
            return (
                true,
                state.tracker.finish(topicPartition, offset: entry.message.offset, generation: entry.generation)
                    .map { (topicPartition, $0) }
            )
        }
        guard let ended, ended.found else { return [] }
        var actions = startAdmitted()
        if let (topicPartition, offset) = ended.offset { actions.insert(.storeOffset(id.lane, topicPartition, offset), at: 0) }
        return actions
    }

    /// The Kafka timestamp of the oldest job the lane holds and has not started (ready, set aside or behind its
    /// key): the part of the lane's lag (`LaneLag`) it has already read. Walks every held job: for a timer, not per event.
    func oldestHeldTimestamp(in lane: Lane) -> Int64? {
        lanes.read(lane) { state -> Int64? in
            var oldest: Int64?
            func note(_ entry: Entry) {
                guard let timestamp = entry.message.timestamp else { return }
                oldest = min(oldest ?? timestamp, timestamp)
            }
            state.ready.forEach(note)
            for tenant in state.setAsideTenants { state.tenants[tenant]?.setAside.forEach(note) }
            for queue in state.behind.values { queue.forEach(note) }
            return oldest
        } ?? nil
    }

    /// When the lane's oldest unfinished job was consumed (ms): its offset is the oldest the lane has not committed.
    func oldestUnfinishedConsumedAt(in lane: Lane) -> Int64? { lanes.read(lane) { $0.tracker.oldestUnfinishedConsumedAt } ?? nil }

    mutating func assigned(_ partitions: [TopicPartition], in lane: Lane) {
        guard lanes.contains(lane) else { return }
        lanes[lane]!.tracker.assign(partitions)
        if lanes[lane]!.lifecycle == .joining { lanes[lane]!.lifecycle = .consuming }
    }

    /// Partitions are about to be taken away: their queued jobs are given up at once (never
    /// started, they are simply redelivered to the next owner). Returns how many of their jobs
    /// still run; the caller waits for `running(in:partitions:)` to reach 0 up to its grace.
    mutating func revoking(_ partitions: [TopicPartition], in lane: Lane) -> Int {
        guard lanes.contains(lane) else { return 0 }
        let revoked = Set(partitions)
        lanes[lane]!.forget(revoked)
        dropQueued(in: lane) { revoked.contains($0.message.topicPartition) }
        return running(in: lane, partitions: partitions)
    }

    /// The revocation goes ahead: completions of the partitions' remaining jobs no longer count.
    /// Returns how many were still running (abandoned to the next owner).
    mutating func revoked(_ partitions: [TopicPartition], in lane: Lane) -> Int {
        guard lanes.contains(lane) else { return 0 }
        let abandoned = running(in: lane, partitions: partitions)
        lanes[lane]!.tracker.revoke(partitions)
        return abandoned
    }

    /// Nothing new starts; queued jobs are given up (uncommitted, redelivered). Running ones finish or are abandoned.
    /// Returns how many jobs were given up.
    mutating func stop() -> Int {
        var dropped = 0
        for lane in Lane.allCases where lanes.contains(lane) {
            lanes[lane]!.lifecycle = .stopping
            dropped += lanes[lane]!.queued
            dropQueued(in: lane) { _ in true }
        }
        return dropped
    }

    // MARK: - Admission

    /// Starts ready jobs while capacity allows, the urgent lane's first, each lane's apps within their shares.
    private mutating func startAdmitted() -> [Action] {
        var actions: [Action] = []
        let sharing = limits.sharesBetweenApps
        for lane in [Lane.urgent, .normal] where lanes.contains(lane) {
            // Each job started takes exactly one of the lane's free places (both terms of `freeCapacity`
            // fall by one), so the count is taken once, not again after every start.
            var free = freeCapacity(of: lane)
            lanes.update(lane) { state in
                if state.lifecycle == .stopping { free = 0 }
                let capacity = state.working + free
                while free > 0, let entry = state.nextToStart(capacity: capacity, sharing: sharing) {
                    state.queued -= 1
                    state.changeLoad(of: entry.job.tenant, working: 1, ready: -1)
                    state.running[entry.id.sequence] = entry
                    actions.append(.start(entry.id, entry.job))
                    free -= 1
                }
                // What `room` reads: the first ready job is one of an app below its share, if any.
                state.setAsideJobsOverShare(state.share(of: capacity, sharing: sharing))
            }
        }
        return actions
    }

    /// Gives up queued jobs matching `drop`, keeping each key's remaining jobs in order behind whatever of the key still runs.
    private mutating func dropQueued(in lane: Lane, where drop: (Entry) -> Bool) {
        var state = lanes[lane]!
        var kept: [Entry] = []
        var dropped = 0
        func giveUp(_ entry: Entry) {
            dropped += 1
            state.heldBytes -= entry.cost
        }
        for entry in state.takeReady() {
            if drop(entry) { giveUp(entry) } else { kept.append(entry) }
        }
        var behind: [MessageKey: FIFOQueue<Entry>] = [:]
        for (key, var queue) in state.behind {
            var remaining = FIFOQueue<Entry>()
            for entry in queue.removeAll() {
                if drop(entry) { giveUp(entry) } else { remaining.append(entry) }
            }
            if !remaining.isEmpty { behind[key] = remaining }
        }
        state.queued -= dropped
        // Rebuild each key's turn: a running job keeps its key busy; otherwise its oldest kept job is ready.
        var busy = Set(state.running.filter { !state.keyReleased.contains($0.key) }.values.compactMap(\.key))
        var ready = FIFOQueue<Entry>()
        for entry in kept {
            if let key = entry.key {
                if busy.contains(key) {
                    behind[key, default: FIFOQueue()].prepend(entry)
                    continue
                }
                busy.insert(key)
            }
            ready.append(entry)
        }
        for (key, var queue) in behind where !busy.contains(key) {
            if let first = queue.popFirst() {
                busy.insert(key)
                ready.append(first)
                behind[key] = queue.isEmpty ? nil : queue
            }
        }
        state.ready = FIFOQueue()
        for entry in ready.removeAll() { state.makeReady(entry) }
        state.behind = behind
        state.busyKeys = busy
        state.behindCount = behind.values.reduce(0) { $0 + $1.count }
        state.bytesBehind = [:]
        for queue in behind.values { queue.forEach { state.changeBytesBehind(in: $0.message.topicPartition, by: $0.cost) } }
        state.pausedForMemory.formIntersection(state.bytesBehind.keys)
        state.balanceHeldBytes(limits: limits)
        state.recountTenants()
        // Keys whose queue shrank with the drop hold their partitions no longer.
        for key in Array(state.stalled.keys) where (behind[key]?.count ?? 0) <= limits.maximumQueuedPerKey / 2 {
            state.unstall(key)
        }
        lanes[lane] = state
    }
}

import PushCore
import PushKafka
import Testing
import TestSupport

@testable import PushPipeline

/// The pipeline's admission, ordering and offsets, driven event by event without a broker.
@Suite("Pipeline state machine")
struct PipelineStateMachineTests {
    /// A consumed job as the state machine sees it: its message, and its app.
    struct TestJob: PipelineJob {
        let message: KafkaMessage
        let tenant: Tenant?
    }

    typealias Machine = PipelineStateMachine<TestJob>

    static let normal = TopicPartition(topic: "push.jobs", partition: 0)
    static let other = TopicPartition(topic: "push.jobs", partition: 1)
    static let urgent = TopicPartition(topic: "push.jobs.urgent", partition: 0)

    static func message(_ offset: Int64, key: String? = nil, app: String? = nil, in partition: TopicPartition = normal) -> TestJob {
        TestJob(
            message: KafkaMessage(
                topicPartition: partition, offset: offset, key: key.map { Array($0.utf8) },
                value: Array("\(offset)".utf8), timestamp: nil),
            tenant: app.map { Tenant(provider: "apns", app: $0) })
    }

    static func machine(
        maximumInFlight: Int = 10, urgentReserved: Int = 0, readAhead: Int = 100,
        readAheadBytes: Int = PipelineConfiguration.defaultReadAheadBytes, lanes: [Lane] = [.normal, .urgent]
    ) -> Machine {
        var machine = Machine(
            limits: .init(
                maximumInFlight: maximumInFlight, urgentReserved: urgentReserved, readAhead: readAhead, readAheadBytes: readAheadBytes),
            lanes: lanes)
        machine.assigned([normal, other], in: .normal)
        if lanes.contains(.urgent) { machine.assigned([urgent], in: .urgent) }
        return machine
    }

    static func started(_ actions: [Machine.Action]) -> [Int64] {
        actions.compactMap { if case .start(_, let job) = $0 { job.message.offset } else { nil } }
    }

    static func ids(_ actions: [Machine.Action]) -> [Machine.JobID] {
        actions.compactMap { if case .start(let id, _) = $0 { id } else { nil } }
    }

    static func offsets(_ actions: [Machine.Action]) -> [Int64] {
        actions.compactMap { if case .storeOffset(_, _, let offset) = $0 { offset } else { nil } }
    }

    @Test("jobs start as they are consumed while capacity allows; the rest wait as values, not tasks")
    func admission() {
        var machine = Self.machine(maximumInFlight: 2)
        let actions = machine.consumed((0..<5).map { Self.message($0) }, in: .normal)
        #expect(Self.started(actions) == [0, 1])
        #expect(machine.running(in: .normal) == 2)
        #expect(machine.queued(in: .normal) == 3)
        #expect(machine.consumed(in: .normal) == 5)
        let next = machine.finished(Self.ids(actions)[0], completed: true)
        #expect(Self.started(next) == [2])
        #expect(Self.offsets(next) == [1])
    }

    @Test(
        "a lane consumes what its free capacity could start, and at capacity reads on up to its read-ahead bound; parked jobs free capacity"
    )
    func room() {
        var machine = Self.machine(maximumInFlight: 2, readAhead: 4)
        #expect(machine.room(in: .normal) == 2)
        let first = Self.ids(machine.consumed([Self.message(0), Self.message(1)], in: .normal))
        #expect(machine.room(in: .normal) == 2, "at capacity it reads on, to see the jobs of other apps")
        _ = machine.consumed([Self.message(2), Self.message(3)], in: .normal)
        #expect(machine.room(in: .normal) == 0, "the read-ahead bound")
        for id in first { _ = machine.parkingChanged(id, parked: true) }
        #expect(machine.running(in: .normal) == 4, "parked jobs free their capacity for the jobs read ahead")
        #expect(machine.room(in: .normal) == 0)
        _ = machine.finished(first[0], completed: true)
        #expect(machine.room(in: .normal) == 1)
        _ = machine.parkingChanged(first[1], parked: false)
        #expect(machine.consumed(in: .normal) == 3)
    }

    @Test("jobs ready to start count against the room they would take; jobs behind their key do not")
    func queuedTakeRoom() {
        var machine = Self.machine(maximumInFlight: 3)
        _ = machine.consumed([Self.message(0, key: "alice"), Self.message(1, key: "alice")], in: .normal)
        #expect(machine.room(in: .normal) == 2)
        var full = Self.machine(maximumInFlight: 1)
        _ = full.consumed([Self.message(0, key: "alice", app: "chat"), Self.message(1, key: "bob", app: "mail")], in: .normal)
        #expect(
            full.room(in: .normal) == 0, "bob's job, of an app below its share, waits for the capacity alice's holds: nothing more is read")
    }

    @Test("jobs of one key run one after another in consumption order; other keys pass them")
    func perKeyOrder() {
        var machine = Self.machine(maximumInFlight: 10)
        let actions = machine.consumed(
            [
                Self.message(0, key: "alice"), Self.message(1, key: "alice"), Self.message(2, key: "bob"),
                Self.message(3, key: "alice"), Self.message(4),
            ], in: .normal)
        #expect(Self.started(actions) == [0, 2, 4])
        let afterFirst = machine.finished(Self.ids(actions)[0], completed: true)
        #expect(Self.started(afterFirst) == [1])
        let afterSecond = machine.finished(Self.ids(afterFirst)[0], completed: true)
        #expect(Self.started(afterSecond) == [3])
    }

    @Test("an offset is stored only when every earlier job of its partition completed")
    func watermark() {
        var machine = Self.machine(maximumInFlight: 10)
        let ids = Self.ids(
            machine.consumed(
                [Self.message(10), Self.message(11), Self.message(12), Self.message(0, in: Self.other)],
                in: .normal))
        #expect(Self.offsets(machine.finished(ids[2], completed: true)).isEmpty)
        #expect(Self.offsets(machine.finished(ids[1], completed: true)).isEmpty)
        #expect(Self.offsets(machine.finished(ids[3], completed: true)) == [1])
        #expect(Self.offsets(machine.finished(ids[0], completed: true)) == [13])
    }

    @Test("an abandoned job is never committed past: the offsets behind it wait for its redelivery")
    func abandonedHoldsTheWatermark() {
        var machine = Self.machine(maximumInFlight: 10)
        let ids = Self.ids(machine.consumed([Self.message(0), Self.message(1)], in: .normal))
        #expect(Self.offsets(machine.finished(ids[0], completed: false)).isEmpty)
        #expect(Self.offsets(machine.finished(ids[1], completed: true)).isEmpty)
        #expect(machine.consumed(in: .normal) == 0)
    }

    @Test("the urgent lane keeps its reserve: a full normal lane never takes it, and urgent jobs start first when capacity frees")
    func urgentReserve() {
        var machine = Self.machine(maximumInFlight: 4, urgentReserved: 1)
        let normal = machine.consumed((0..<10).map { Self.message($0) }, in: .normal)
        #expect(Self.started(normal) == [0, 1, 2])
        let urgent = machine.consumed([Self.message(0, in: Self.urgent), Self.message(1, in: Self.urgent)], in: .urgent)
        #expect(Self.started(urgent) == [0])
        #expect(machine.running(in: .urgent) == 1)
        let freed = machine.finished(Self.ids(normal)[0], completed: true)
        #expect(freed.contains { if case .start(let id, _) = $0 { id.lane == .urgent } else { false } })
        #expect(machine.running(in: .normal) == 2)
    }

    @Test("the urgent lane may use what the normal lane leaves free")
    func urgentBorrows() {
        var machine = Self.machine(maximumInFlight: 4, urgentReserved: 1)
        let urgent = machine.consumed((0..<6).map { Self.message($0, in: Self.urgent) }, in: .urgent)
        #expect(Self.started(urgent).count == 4)
        #expect(Self.started(machine.consumed([Self.message(0)], in: .normal)).isEmpty)
    }

    @Test("a parked job frees its capacity for the next job and takes it back when unparked")
    func parking() {
        var machine = Self.machine(maximumInFlight: 1)
        let first = machine.consumed([Self.message(0), Self.message(1)], in: .normal)
        #expect(Self.started(first) == [0])
        let parked = machine.parkingChanged(Self.ids(first)[0], parked: true)
        #expect(Self.started(parked) == [1])
        #expect(Self.started(machine.parkingChanged(Self.ids(first)[0], parked: false)).isEmpty)
        #expect(Self.started(machine.consumed([Self.message(2)], in: .normal)).isEmpty)
    }

    @Test("revoked partitions give up their queued jobs at once and count only their running ones; other partitions go on")
    func revocation() {
        var machine = Self.machine(maximumInFlight: 2)
        let actions = machine.consumed(
            [Self.message(0), Self.message(1), Self.message(2), Self.message(0, in: Self.other)],
            in: .normal)
        #expect(Self.started(actions) == [0, 1])
        #expect(machine.revoking([Self.normal], in: .normal) == 2)
        #expect(machine.queued(in: .normal) == 1)
        let first = machine.finished(Self.ids(actions)[0], completed: true)
        #expect(Self.offsets(first) == [1])
        #expect(Self.started(first) == [0])
        #expect(machine.running(in: .normal, partitions: [Self.normal]) == 1)
        #expect(machine.revoked([Self.normal], in: .normal) == 1)
        let late = machine.finished(Self.ids(actions)[1], completed: true)
        #expect(Self.offsets(late).isEmpty)
        #expect(Self.started(late).isEmpty)
    }

    @Test("a revocation keeps each surviving key's jobs in order behind the one still running")
    func revocationKeepsKeyOrder() {
        var machine = Self.machine(maximumInFlight: 10)
        let actions = machine.consumed(
            [
                Self.message(0, key: "alice"), Self.message(1, key: "bob", in: Self.other),
                Self.message(1, key: "alice"), Self.message(2, key: "bob", in: Self.other),
                Self.message(3, key: "bob", in: Self.other),
            ], in: .normal)
        #expect(Self.started(actions) == [0, 1])
        #expect(machine.revoking([Self.normal], in: .normal) == 1)
        #expect(machine.queued(in: .normal) == 2)
        let bob = Self.ids(actions)[1]
        let next = machine.finished(bob, completed: true)
        #expect(Self.started(next) == [2])
        #expect(Self.started(machine.finished(Self.ids(next)[0], completed: true)) == [3])
    }

    @Test("a message of a partition revoked while its batch was being read is given up, never started")
    func messageOfRevokedPartition() {
        var machine = Self.machine(maximumInFlight: 10)
        _ = machine.revoking([Self.other], in: .normal)
        _ = machine.revoked([Self.other], in: .normal)
        let actions = machine.consumed([Self.message(0, in: Self.other), Self.message(0)], in: .normal)
        #expect(Self.started(actions) == [0])
        #expect(machine.consumed(in: .normal) == 1)
    }

    @Test("a stop gives up every queued job and starts nothing more; running jobs still finish and store their offsets")
    func stop() {
        var machine = Self.machine(maximumInFlight: 1)
        let actions = machine.consumed([Self.message(0), Self.message(1), Self.message(2)], in: .normal)
        #expect(machine.stop() == 2)
        #expect(machine.room(in: .normal) == 0)
        let finished = machine.finished(Self.ids(actions)[0], completed: true)
        #expect(Self.started(finished).isEmpty)
        #expect(Self.offsets(finished) == [1])
        #expect(machine.consumed == 0)
    }

    @Test("a rewound partition starts over: completions from before the rewind never move its offset")
    func rewind() {
        var machine = Self.machine(maximumInFlight: 10)
        let before = Self.ids(machine.consumed([Self.message(5), Self.message(6)], in: .normal))
        let after = Self.ids(machine.consumed([Self.message(3)], in: .normal))
        #expect(Self.offsets(machine.finished(before[0], completed: true)).isEmpty)
        #expect(Self.offsets(machine.finished(after[0], completed: true)) == [4])
    }

    @Test("a finish or park of an unknown job changes nothing")
    func unknownJob() {
        var machine = Self.machine()
        let stranger = Machine.JobID(lane: .normal, sequence: 999)
        #expect(machine.finished(stranger, completed: true).isEmpty)
        #expect(machine.parkingChanged(stranger, parked: true).isEmpty)
        #expect(machine.consumed == 0)
    }

    @Test(
        "under any sequence of events no job starts beyond capacity, the read-ahead and bytes bounds are never exceeded, the counts agree, and each key runs one job at a time"
    )
    func randomEvents() {
        var generator = SplitMix(seed: 7)
        for _ in 0..<200 {
            let bytesBound = 10 * Self.smallJobCost
            var machine = Self.machine(maximumInFlight: 3, urgentReserved: 1, readAhead: 6, readAheadBytes: bytesBound)
            var running: [Machine.JobID: KafkaMessage] = [:]
            var parked = Set<Machine.JobID>()
            var offsets: [Lane: Int64] = [.normal: 0, .urgent: 0]
            for _ in 0..<60 {
                var actions: [Machine.Action] = []
                switch generator.next() % 5 {
                case 0, 1:
                    let lane: Lane = generator.next() % 3 == 0 ? .urgent : .normal
                    let room = machine.room(in: lane)
                    let count = min(room, Int(generator.next() % 4))
                    let partition = lane == .urgent ? Self.urgent : Self.normal
                    let messages = (0..<count).map { _ in
                        offsets[lane]! += 1
                        return Self.message(
                            offsets[lane]!, key: ["a", "b", "c", nil][Int(generator.next() % 4)],
                            app: ["burst", "burst", "quiet", nil][Int(generator.next() % 4)], in: partition)
                    }
                    actions = machine.consumed(messages, in: lane)
                case 2 where !running.isEmpty:
                    let id = running.keys.sorted { $0.sequence < $1.sequence }[Int(generator.next() % UInt64(running.count))]
                    running[id] = nil
                    parked.remove(id)
                    actions = machine.finished(id, completed: generator.next() % 4 != 0)
                case 3 where !running.isEmpty:
                    let id = running.keys.sorted { $0.sequence < $1.sequence }[Int(generator.next() % UInt64(running.count))]
                    let park = !parked.contains(id)
                    if park { parked.insert(id) } else { parked.remove(id) }
                    actions = machine.parkingChanged(id, parked: park)
                default:
                    continue
                }
                var startedLanes = Set<Lane>()
                for case .start(let id, let job) in actions {
                    running[id] = job.message
                    startedLanes.insert(id.lane)
                }
                // An unparked job goes on whatever runs; a job only starts within capacity (the urgent one also within its reserve).
                let urgentWorking = running.keys.filter { $0.lane == .urgent && !parked.contains($0) }.count
                let normalWorking = running.keys.filter { $0.lane == .normal && !parked.contains($0) }.count
                if startedLanes.contains(.normal) { #expect(normalWorking + max(urgentWorking, 1) <= 3) }
                if startedLanes.contains(.urgent) { #expect(urgentWorking <= 1 || urgentWorking + normalWorking <= 3) }
                for lane in [Lane.normal, .urgent] {
                    let behind = machine.queuedBehindKeys(in: lane)
                    #expect(machine.consumed(in: lane) - behind <= 6)
                    let held = machine.heldBytes(in: lane)
                    #expect(held <= bytesBound + bytesBound / 1000, "consumed within the bytes bound, but for the messages' own size")
                    #expect(machine.consumed(in: lane) > 0 || held == 0, "a lane that holds nothing counts no bytes")
                    #expect(machine.running(in: lane) == running.keys.filter { $0.lane == lane }.count)
                    let keys = running.filter { $0.key.lane == lane }.compactMap(\.value.key)
                    #expect(Set(keys).count == keys.count, "two jobs of one key run at once")
                }
            }
        }
    }

    @Test("jobs waiting behind a slow key take no room: other users' jobs are consumed and start")
    func slowKeyTakesNoRoom() {
        var machine = Self.machine(maximumInFlight: 10, readAhead: 20)
        let slow = machine.consumed((0..<10).map { Self.message($0, key: "slow") }, in: .normal)
        #expect(Self.started(slow) == [0], "one job of the key at a time")
        #expect(machine.queuedBehindKeys(in: .normal) == 9)
        #expect(machine.room(in: .normal) == 9, "the nine waiting behind the key hold no capacity")
        let others = machine.consumed((10..<19).map { Self.message($0, key: "user-\($0)") }, in: .normal)
        #expect(Self.started(others) == Array(10..<19), "other users start while the slow key's first job runs")
        #expect(machine.pausedPartitions(in: .normal).isEmpty)
    }

    @Test("a key whose queue passes its bound pauses only the partition holding it, which resumes at half the bound")
    func backedUpKeyPausesItsPartition() {
        var machine = Self.machine(maximumInFlight: 4, readAhead: 4)
        #expect(machine.limits.maximumQueuedPerKey == 4)
        let first = machine.consumed((0..<6).map { Self.message($0, key: "slow") }, in: .normal)
        #expect(machine.queuedBehindKeys(in: .normal) == 5)
        #expect(machine.pausedPartitions(in: .normal) == [Self.normal])
        // Another partition's users still flow.
        let others = machine.consumed((0..<3).map { Self.message($0, key: "user-\($0)", in: Self.other) }, in: .normal)
        #expect(Self.started(others) == [0, 1, 2])
        // The slow key's jobs finish one by one; at two waiting (half the bound) its partition resumes.
        var running = Self.ids(first)[0]
        for expected in [4, 3, 2] {
            let next = machine.finished(running, completed: true)
            running = Self.ids(next)[0]
            #expect(machine.queuedBehindKeys(in: .normal) == expected)
            #expect(machine.pausedPartitions(in: .normal) == (expected > 2 ? [Self.normal] : []))
        }
    }

    /// What one test message with a one-character key and a one-digit offset counts for.
    static let smallJobCost = Machine.Limits.cost(of: message(0, key: "a").message)

    @Test("what a lane holds is bounded by its bytes, jobs behind keys included: at the bound it consumes nothing more")
    func heldBytesAreBounded() {
        var machine = Self.machine(maximumInFlight: 2, readAhead: 100, readAheadBytes: 8 * Self.smallJobCost)
        #expect(Self.smallJobCost == 2050, "the key and value bytes and 2 KiB for the decoded job")
        _ = machine.consumed((0..<8).map { Self.message(Int64($0), key: ["a", "b"][$0 % 2]) }, in: .normal)
        #expect(machine.queuedBehindKeys(in: .normal) == 6)
        #expect(machine.heldBytes(in: .normal) == 8 * Self.smallJobCost)
        #expect(machine.room(in: .normal) == 0, "the jobs count is far from its bound; the bytes are at theirs")
    }

    @Test(
        "from half the bytes bound the partitions whose keys hold the most are paused and the others read on; they resume below a quarter, or once nothing waits behind their keys"
    )
    func memoryPressurePausesTheHeaviestPartitions() {
        var machine = Self.machine(maximumInFlight: 2, readAhead: 100, readAheadBytes: 16 * Self.smallJobCost)
        // Two slow users in one partition: one job each running, four each behind them.
        let slow = machine.consumed((0..<10).map { Self.message(Int64($0), key: ["a", "b"][$0 % 2]) }, in: .normal)
        #expect(Self.started(slow) == [0, 1])
        #expect(machine.limits.maximumQueuedPerKey == 4, "no key passed its own bound: the pause is for memory")
        #expect(machine.pausedPartitions(in: .normal) == [Self.normal])
        #expect(machine.room(in: .normal) > 0, "the other partition is still read")
        let others = machine.consumed([Self.message(0, key: "c", in: Self.other), Self.message(1, key: "d", in: Self.other)], in: .normal)
        #expect(Self.started(others).isEmpty, "capacity is held by the slow users' jobs")
        #expect(machine.pausedPartitions(in: .normal) == [Self.normal])
        // The slow users' jobs finish one by one: the other users' jobs start first, and the paused partition
        // resumes once the lane holds less than a quarter of the bound.
        var running = Self.ids(slow)
        var startedOthers: [Int64] = []
        while !running.isEmpty {
            let next = machine.finished(running.removeFirst(), completed: true)
            running += Self.ids(next)
            startedOthers += next.compactMap {
                if case .start(_, let job) = $0, job.message.topicPartition == Self.other { job.message.offset } else { nil }
            }
            let stillHeld = machine.heldBytes(in: .normal) >= 4 * Self.smallJobCost && machine.queuedBehindKeys(in: .normal) > 0
            #expect(machine.pausedPartitions(in: .normal) == (stillHeld ? [Self.normal] : []))
        }
        #expect(startedOthers == [0, 1])
        #expect(machine.heldBytes(in: .normal) == 0)
    }

    @Test(
        "a partition paused for memory resumes once its keys hold nothing behind them, though the lane still holds more than a quarter of the bound"
    )
    func memoryPauseEndsWithTheQueueBehindItsKeys() {
        var machine = Self.machine(maximumInFlight: 4, readAhead: 100, readAheadBytes: 16 * Self.smallJobCost)
        // Three jobs of the other partition that keep running hold a quarter of the bound between them and one more.
        _ = machine.consumed((0..<3).map { Self.message(Int64($0), key: "x\($0)", in: Self.other) }, in: .normal)
        let slow = machine.consumed((0..<7).map { Self.message(Int64($0), key: "a") }, in: .normal)
        #expect(machine.pausedPartitions(in: .normal) == [Self.normal], "one key holds six jobs behind it")
        var running = Self.ids(slow)
        while machine.queuedBehindKeys(in: .normal) > 0 {
            running += Self.ids(machine.finished(running.removeFirst(), completed: true))
        }
        #expect(machine.heldBytes(in: .normal) >= 4 * Self.smallJobCost, "the lane still holds a quarter of its bound")
        #expect(machine.pausedPartitions(in: .normal).isEmpty, "nothing waits behind the partition's keys: it is read again")
    }

    @Test(
        "ten slow users' queued jobs do not stop the lane: forty other users' jobs are consumed and start first as capacity frees"
    )
    func slowUsersDoNotStopOthers() {
        // PUSH_MAX_IN_FLIGHT=10 with the default read-ahead bounds: ten users of a push service that answers in
        // 5 s, ten jobs each, then forty other users' jobs.
        let configuration = PipelineConfiguration(maximumInFlightJobs: 10, urgentReservedInFlightJobs: 0)
        var machine = Machine(limits: .init(configuration), lanes: [.normal])
        machine.assigned([Self.normal], in: .normal)
        var offset: Int64 = 0
        func next(_ key: String) -> TestJob {
            offset += 1
            return Self.message(offset, key: key, app: "chat")
        }
        let slow = (0..<10).flatMap { _ in (0..<10).map { next("slow-\($0)") } }
        var actions = machine.consumed(slow, in: .normal)
        actions += machine.consumed((0..<40).map { next("other-\($0)") }, in: .normal)
        #expect(Self.started(actions).count == 10)
        #expect(machine.consumed(in: .normal) == 140, "every job was read: 90 behind their users, 40 ready")
        #expect(machine.pausedPartitions(in: .normal).isEmpty)
        // The slow requests answer: each place they free goes to another user's job, older in turn than the slow
        // users' next ones, and so on until all forty ran.
        var running = Self.ids(actions)
        var started: [String] = []
        while started.filter({ $0.hasPrefix("other-") }).count < 40, !running.isEmpty {
            let now = machine.finished(running.removeFirst(), completed: true)
            running += Self.ids(now)
            for case .start(_, let job) in now { started.append(String(decoding: job.message.key!, as: UTF8.self)) }
        }
        #expect(started.prefix(40).allSatisfy { $0.hasPrefix("other-") }, "no slow user's next job starts before the others")
    }

    @Test("a revoked partition is no longer paused for a key, and a key's other partitions resume when the drop shortens its queue")
    func revocationForgetsPauses() {
        var machine = Self.machine(maximumInFlight: 2, readAhead: 2)
        _ = machine.consumed((0..<4).map { Self.message($0, key: "slow") }, in: .normal)
        _ = machine.consumed([Self.message(0, key: "slow", in: Self.other)], in: .normal)
        #expect(machine.pausedPartitions(in: .normal) == [Self.normal, Self.other])
        _ = machine.revoking([Self.normal], in: .normal)
        #expect(machine.pausedPartitions(in: .normal).isEmpty, "one job left behind the key: under half the bound")
    }
}

extension PipelineStateMachineTests {
    @Test(
        "a job waiting for a retry in its task lets its key go: the key's next job starts, and the first one's finish releases nothing twice"
    )
    func releasedKeyGoesToTheNextJob() {
        var machine = Self.machine(maximumInFlight: 10)
        let first = machine.consumed(
            [Self.message(0, key: "alice"), Self.message(1, key: "alice"), Self.message(2, key: "alice")], in: .normal)
        #expect(Self.started(first) == [0])
        let afterRelease = machine.releaseKey(of: Self.ids(first)[0])
        #expect(Self.started(afterRelease) == [1])
        #expect(machine.releaseKey(of: Self.ids(first)[0]).isEmpty, "a key is let go once")
        let afterFinish = machine.finished(Self.ids(first)[0], completed: true)
        #expect(Self.started(afterFinish).isEmpty, "job 2 still waits for job 1, which holds the key now")
        #expect(Self.offsets(afterFinish) == [1])
        #expect(Self.started(machine.finished(Self.ids(afterRelease)[0], completed: true)) == [2])
    }
}

/// Fair sharing of a lane between apps (`Tenant`): one app's burst never holds every place while another app's job waits.
extension PipelineStateMachineTests {
    /// Finishes the running job whose offset is `offset` and returns what that let start.
    static func finish(_ offset: Int64, of running: inout [Int64: Machine.JobID], in machine: inout Machine) -> [Int64] {
        let actions = machine.finished(running.removeValue(forKey: offset)!, completed: true)
        for case .start(let id, let job) in actions { running[job.message.offset] = id }
        return Self.started(actions)
    }

    static func record(_ actions: [Machine.Action], into running: inout [Int64: Machine.JobID]) {
        for case .start(let id, let job) in actions { running[job.message.offset] = id }
    }

    @Test("one app alone uses the whole lane, and a lane at capacity reads on to find other apps' jobs")
    func singleAppUsesTheWholeLane() {
        var machine = Self.machine(maximumInFlight: 4, readAhead: 12)
        let burst = machine.consumed((0..<10).map { Self.message($0, app: "burst") }, in: .normal)
        #expect(Self.started(burst) == [0, 1, 2, 3], "no other app waits: every place is the burst's")
        #expect(machine.room(in: .normal) == 2, "at capacity with no other app's job ready, the lane reads on to its read-ahead bound")
        var running: [Int64: Machine.JobID] = [:]
        Self.record(burst, into: &running)
        #expect(Self.finish(0, of: &running, in: &machine) == [4], "the burst's next job takes the freed place")
    }

    @Test("a quiet app's job starts at the next free place, before the burst's backlog read ahead of it; then the lane reads no further")
    func quietAppPassesTheBurst() {
        var machine = Self.machine(maximumInFlight: 4, readAhead: 20)
        var running: [Int64: Machine.JobID] = [:]
        Self.record(machine.consumed((0..<14).map { Self.message($0, app: "burst") }, in: .normal), into: &running)
        #expect(machine.room(in: .normal) == 6)
        let quiet = machine.consumed([Self.message(14, app: "quiet"), Self.message(15, app: "quiet")], in: .normal)
        #expect(Self.started(quiet).isEmpty, "every place is taken")
        #expect(machine.room(in: .normal) == 0, "a job of an app below its share waits for capacity: nothing more is read")
        #expect(Self.finish(0, of: &running, in: &machine) == [14], "the quiet app's job, not the burst's job 4, takes the freed place")
        #expect(Self.finish(1, of: &running, in: &machine) == [15], "the quiet app is still below its share (2 of 4)")
        #expect(Self.finish(2, of: &running, in: &machine) == [4], "no other app waits: the burst's backlog goes on, oldest first")
        let offsets = machine.finished(running.removeValue(forKey: 14)!, completed: true)
        #expect(Self.offsets(offsets).isEmpty, "offsets still move only over the contiguous run: jobs 3 and 4 are unfinished")
    }

    @Test("two busy apps share the lane evenly; the oldest job of the app below its share starts first")
    func busyAppsShareEvenly() {
        var machine = Self.machine(maximumInFlight: 4, readAhead: 40)
        var running: [Int64: Machine.JobID] = [:]
        Self.record(machine.consumed((0..<4).map { Self.message($0, app: "a") }, in: .normal), into: &running)
        Self.record(
            machine.consumed((4..<10).map { Self.message($0, app: "a") } + (10..<20).map { Self.message($0, app: "b") }, in: .normal),
            into: &running)
        #expect(Self.finish(0, of: &running, in: &machine) == [10])
        #expect(Self.finish(1, of: &running, in: &machine) == [11], "b holds 1 of its share of 2")
        #expect(Self.finish(2, of: &running, in: &machine) == [4], "b holds its share: a, below its own, goes on")
        #expect(Self.finish(10, of: &running, in: &machine) == [12])
        #expect(Self.finish(4, of: &running, in: &machine) == [5])
        let apps = Dictionary(grouping: running.keys) { $0 < 10 ? "a" : "b" }.mapValues(\.count)
        #expect(apps == ["a": 2, "b": 2])
    }

    @Test("a job set aside while its app held its share keeps its key's order: the user's next job, of another app, waits for it")
    func setAsideKeepsKeyOrder() {
        var machine = Self.machine(maximumInFlight: 2, readAhead: 20)
        var running: [Int64: Machine.JobID] = [:]
        let first = machine.consumed(
            [
                Self.message(0, app: "burst"), Self.message(1, app: "burst"), Self.message(2, key: "alice", app: "burst"),
                Self.message(3, key: "alice", app: "quiet"), Self.message(4, app: "quiet"),
            ], in: .normal)
        Self.record(first, into: &running)
        #expect(
            Self.started(first) == [0, 4],
            "a share of one place each: alice's quiet job waits behind her burst job, the other quiet job starts")
        #expect(Self.finish(0, of: &running, in: &machine) == [1])
        #expect(Self.finish(1, of: &running, in: &machine) == [2])
        #expect(Self.finish(2, of: &running, in: &machine) == [3], "alice's next job starts once her first finished")
    }

    @Test("the urgent lane still starts first: a freed place goes to an urgent job before a quiet app's normal one")
    func urgentFirstWithShares() {
        var machine = Self.machine(maximumInFlight: 4, urgentReserved: 1)
        var running: [Int64: Machine.JobID] = [:]
        Self.record(machine.consumed((0..<10).map { Self.message($0, app: "burst") }, in: .normal), into: &running)
        let urgent = machine.consumed(
            [Self.message(0, app: "calls", in: Self.urgent), Self.message(1, app: "calls", in: Self.urgent)],
            in: .urgent)
        #expect(Self.started(urgent) == [0], "the reserve")
        _ = machine.consumed([Self.message(10, app: "quiet")], in: .normal)
        let freed = machine.finished(running.removeValue(forKey: 0)!, completed: true)
        #expect(Self.ids(freed).map(\.lane) == [.urgent], "the urgent job takes the freed place; the quiet app's job waits for the next")
        #expect(Self.finish(1, of: &running, in: &machine) == [10])
    }

    @Test("apps are forgotten with their last job: a revocation or a stop leaves no app behind")
    func appsAreBounded() {
        var machine = Self.machine(maximumInFlight: 2, readAhead: 20)
        var running: [Int64: Machine.JobID] = [:]
        Self.record(machine.consumed((0..<6).map { Self.message($0, app: "app-\($0 % 3)") }, in: .normal), into: &running)
        #expect(machine.apps(in: .normal) == 3)
        _ = machine.revoking([Self.normal], in: .normal)
        #expect(machine.apps(in: .normal) == 2, "only the two running jobs' apps")
        for offset in Array(running.keys) { _ = machine.finished(running.removeValue(forKey: offset)!, completed: false) }
        #expect(machine.apps(in: .normal) == 0)
    }
}

extension PipelineStateMachineTests {
    @Test("without sharing, ready jobs start in the order consumed whatever their app, and a lane at capacity reads no further")
    func sharingOff() {
        var machine = Machine(
            limits: .init(maximumInFlight: 2, urgentReserved: 0, readAhead: 20, sharesBetweenApps: false), lanes: [.normal])
        machine.assigned([Self.normal], in: .normal)
        var running: [Int64: Machine.JobID] = [:]
        Self.record(
            machine.consumed((0..<4).map { Self.message($0, app: "burst") } + [Self.message(4, app: "quiet")], in: .normal),
            into: &running)
        #expect(machine.room(in: .normal) == 0)
        #expect(Self.finish(0, of: &running, in: &machine) == [2])
    }
}

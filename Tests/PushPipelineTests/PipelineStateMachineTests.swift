import PushCore
import PushKafka
import Testing
import TestSupport

@testable import PushPipeline

/// The pipeline's admission, ordering and offsets, driven event by event without a broker.
@Suite("Pipeline state machine")
struct PipelineStateMachineTests {
    typealias Machine = PipelineStateMachine

    static let normal = TopicPartition(topic: "push.jobs", partition: 0)
    static let other = TopicPartition(topic: "push.jobs", partition: 1)
    static let urgent = TopicPartition(topic: "push.jobs.urgent", partition: 0)

    static func message(_ offset: Int64, key: String? = nil, in partition: TopicPartition = normal) -> KafkaMessage {
        KafkaMessage(topicPartition: partition, offset: offset, key: key.map { Array($0.utf8) }, value: Array("\(offset)".utf8),
                     timestamp: nil)
    }

    static func machine(maximumInFlight: Int = 10, urgentReserved: Int = 0, readAhead: Int = 100,
                        lanes: [Lane] = [.normal, .urgent]) -> Machine {
        var machine = Machine(limits: .init(maximumInFlight: maximumInFlight, urgentReserved: urgentReserved, readAhead: readAhead),
                              lanes: lanes)
        machine.assigned([normal, other], in: .normal)
        if lanes.contains(.urgent) { machine.assigned([urgent], in: .urgent) }
        return machine
    }

    static func started(_ actions: [Machine.Action]) -> [Int64] {
        actions.compactMap { if case .start(_, let message) = $0 { message.offset } else { nil } }
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

    @Test("a lane consumes only what its free capacity could start; parked jobs free capacity, up to the read-ahead bound")
    func room() {
        var machine = Self.machine(maximumInFlight: 2, readAhead: 4)
        #expect(machine.room(in: .normal) == 2)
        let first = Self.ids(machine.consumed([Self.message(0), Self.message(1)], in: .normal))
        #expect(machine.room(in: .normal) == 0)
        for id in first { _ = machine.parkingChanged(id, parked: true) }
        #expect(machine.room(in: .normal) == 2)
        _ = machine.consumed([Self.message(2), Self.message(3)], in: .normal)
        #expect(machine.room(in: .normal) == 0)
        _ = machine.finished(first[0], completed: true)
        #expect(machine.room(in: .normal) == 0, "capacity is full again")
        _ = machine.parkingChanged(first[1], parked: false)
        #expect(machine.consumed(in: .normal) == 3)
    }

    @Test("jobs ready to start count against the room they would take; jobs behind their key do not")
    func queuedTakeRoom() {
        var machine = Self.machine(maximumInFlight: 3)
        _ = machine.consumed([Self.message(0, key: "alice"), Self.message(1, key: "alice")], in: .normal)
        #expect(machine.room(in: .normal) == 2)
        var full = Self.machine(maximumInFlight: 1)
        _ = full.consumed([Self.message(0, key: "alice"), Self.message(1, key: "bob")], in: .normal)
        #expect(full.room(in: .normal) == 0, "bob's job is ready and waits for the capacity alice's holds")
    }

    @Test("jobs of one key run one after another in consumption order; other keys pass them")
    func perKeyOrder() {
        var machine = Self.machine(maximumInFlight: 10)
        let actions = machine.consumed([Self.message(0, key: "alice"), Self.message(1, key: "alice"), Self.message(2, key: "bob"),
                                        Self.message(3, key: "alice"), Self.message(4)], in: .normal)
        #expect(Self.started(actions) == [0, 2, 4])
        let afterFirst = machine.finished(Self.ids(actions)[0], completed: true)
        #expect(Self.started(afterFirst) == [1])
        let afterSecond = machine.finished(Self.ids(afterFirst)[0], completed: true)
        #expect(Self.started(afterSecond) == [3])
    }

    @Test("an offset is stored only when every earlier job of its partition completed")
    func watermark() {
        var machine = Self.machine(maximumInFlight: 10)
        let ids = Self.ids(machine.consumed([Self.message(10), Self.message(11), Self.message(12), Self.message(0, in: Self.other)],
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
        let actions = machine.consumed([Self.message(0), Self.message(1), Self.message(2), Self.message(0, in: Self.other)],
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
        let actions = machine.consumed([Self.message(0, key: "alice"), Self.message(1, key: "bob", in: Self.other),
                                        Self.message(1, key: "alice"), Self.message(2, key: "bob", in: Self.other),
                                        Self.message(3, key: "bob", in: Self.other)], in: .normal)
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

    @Test("under any sequence of events no job starts beyond capacity, read-ahead and the bound behind keys are never exceeded, the counts agree, and each key runs one job at a time")
    func randomEvents() {
        var generator = SplitMix(seed: 7)
        for _ in 0..<200 {
            var machine = Self.machine(maximumInFlight: 3, urgentReserved: 1, readAhead: 6)
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
                        return Self.message(offsets[lane]!, key: ["a", "b", "c", nil][Int(generator.next() % 4)], in: partition)
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
                for case .start(let id, let message) in actions {
                    running[id] = message
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
                    #expect(behind <= machine.limits.maximumQueuedBehindKeys)
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

    @Test("jobs behind keys are bounded all together: past the bound the lane consumes nothing more")
    func behindKeysAreBounded() {
        var machine = Self.machine(maximumInFlight: 2, readAhead: 2)
        #expect(machine.limits.maximumQueuedBehindKeys == 4)
        _ = machine.consumed([Self.message(0, key: "a"), Self.message(1, key: "b")], in: .normal)
        _ = machine.consumed([Self.message(2, key: "a"), Self.message(3, key: "b"), Self.message(4, key: "a"), Self.message(5, key: "b")],
                             in: .normal)
        #expect(machine.queuedBehindKeys(in: .normal) == 4)
        #expect(machine.room(in: .normal) == 0)
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
    @Test("a job waiting for a retry in its task lets its key go: the key's next job starts, and the first one's finish releases nothing twice")
    func releasedKeyGoesToTheNextJob() {
        var machine = Self.machine(maximumInFlight: 10)
        let first = machine.consumed([Self.message(0, key: "alice"), Self.message(1, key: "alice"), Self.message(2, key: "alice")], in: .normal)
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

import PushCore
import PushKafka
import Testing
import TestSupport

@testable import PushPipeline

/// Admission with the app slots as its sub-machine, driven event by event: no pipeline, no lock, no tasks.
@Suite("Job admission: the state machine and its app slots, events in, actions out")
struct JobAdmissionTests {
    static let partition = TopicPartition(topic: "push.jobs", partition: 0)
    static let other = TopicPartition(topic: "push.jobs", partition: 1)
    static let app = DeliveryScope(provider: .proxy, key: "chat")
    static let longestSlotWait = Duration.seconds(30)

    /// A consumed job with one target of `scope`, as `JobProcessor.admit` makes it (its content does not matter here).
    static func job(_ offset: Int64, in partition: TopicPartition = partition, user: String? = nil) -> JobProcessor.AdmittedJob {
        JobProcessor.AdmittedJob(
            message: KafkaMessage(
                topicPartition: partition, offset: offset, key: Array((user ?? "user-\(offset)").utf8), value: Array("\(offset)".utf8),
                timestamp: nil),
            lane: .normal, fallbackCreatedAt: 0, decoded: .failure(JobRejection(.invalidJSON, "not decoded here")), scope: app,
            deliveryLane: .normal, consumedBefore: false)
    }

    static func admission(maximumInFlight: Int, appLimit: Int) -> JobAdmission {
        var machine = JobAdmission.Machine(
            limits: .init(maximumInFlight: maximumInFlight, urgentReserved: 0, readAhead: 100), lanes: [.normal])
        machine.assigned([partition, other], in: .normal)
        return JobAdmission(
            machine: machine, limits: AppConcurrencyLimits(limit: appLimit, metrics: PipelineMetrics()), longestSlotWait: longestSlotWait)
    }

    static func launched(_ actions: JobAdmission.Actions) -> [Int64] { actions.launches.map(\.admitted.message.offset) }

    /// Frees one slot of `scope`, as a send's answer does, and takes in what it moves on.
    static func release(_ scope: DeliveryScope, in admission: inout JobAdmission) -> JobAdmission.Actions {
        var actions = JobAdmission.Actions()
        let turns = admission.slots.release(scope)
        admission.slotsChanged(turns, &actions)
        return actions
    }

    @Test(
        "a job whose app slot is free is launched holding a permit of its scope; one whose slot is taken waits parked as a value, holding no capacity, and is launched with the permit a release hands it"
    )
    func jobsWaitForTheirAppSlotAsParkedValues() throws {
        var admission = Self.admission(maximumInFlight: 2, appLimit: 1)
        var actions = JobAdmission.Actions()
        admission.consumed([Self.job(0), Self.job(1), Self.job(2)], in: .normal, at: 0, &actions)
        #expect(Self.launched(actions) == [0])
        #expect(actions.launches.first?.slot?.scope == Self.app)
        #expect(actions.waited.map(\.stage) == [.waitingForApp, .waitingForApp])
        #expect(actions.woken.isEmpty, "no consumer thread waits")
        #expect(admission.waitingForSlot.count == 2)
        #expect(admission.machine.running(in: .normal) == 3, "two of them parked: they hold none of the two places")

        let afterRelease = Self.release(Self.app, in: &admission)
        #expect(Self.launched(afterRelease) == [1], "the oldest waiting job goes first")
        #expect(afterRelease.launches.first?.slot?.scope == Self.app, "it holds the slot the release handed on")
        #expect(admission.waitingForSlot.count == 1)
    }

    @Test("a job waiting for its slot past the longest wait is launched without one, its wait spent; those still within it wait on")
    func overdueWaitsAreLaunchedWithoutASlot() {
        var admission = Self.admission(maximumInFlight: 10, appLimit: 1)
        var actions = JobAdmission.Actions()
        admission.consumed([Self.job(0), Self.job(1)], in: .normal, at: 0, &actions)
        var early = JobAdmission.Actions()
        admission.launchOverdue(in: .normal, at: .now, &early)
        #expect(early.launches.isEmpty)

        var overdue = JobAdmission.Actions()
        admission.launchOverdue(in: .normal, at: .now + Self.longestSlotWait + .seconds(1), &overdue)
        #expect(Self.launched(overdue) == [1])
        #expect(overdue.launches.first?.slot == nil)
        #expect(overdue.launches.first?.slotWaitSpent == true)
        #expect(admission.waitingForSlot.isEmpty)
    }

    @Test(
        "a stop gives up the jobs queued or waiting for their slots (uncommitted), launches nothing more, and a slot released afterwards is not handed on"
    )
    func stopGivesUpWaitingJobs() {
        var admission = Self.admission(maximumInFlight: 2, appLimit: 1)
        var actions = JobAdmission.Actions()
        admission.consumed((0..<4).map { Self.job($0) } + [Self.job(4, user: "user-0")], in: .normal, at: 0, &actions)
        #expect(Self.launched(actions) == [0])
        #expect(admission.waitingForSlot.count == 3)
        #expect(admission.machine.queued(in: .normal) == 1, "the fifth waits behind its user's first")

        var stopping = JobAdmission.Actions()
        #expect(admission.stop(&stopping) == 4)
        #expect(stopping.launches.isEmpty)
        #expect(admission.takeOffsetsToStore(in: .normal).isEmpty, "given up, not completed: no offset moves")
        #expect(admission.isStopping(.normal))
        #expect(admission.machine.lifecycle(of: .normal) == .stopping)
        #expect(admission.waitingForSlot.isEmpty)

        #expect(Self.launched(Self.release(Self.app, in: &admission)).isEmpty)
        #expect(admission.slots.running(Self.app) == 0)
    }

    @Test("a revocation withdraws the jobs of the revoked partitions waiting for their slots, and no others")
    func revocationWithdrawsOnlyItsPartitionsWaits() {
        var admission = Self.admission(maximumInFlight: 10, appLimit: 1)
        var actions = JobAdmission.Actions()
        admission.consumed([Self.job(0), Self.job(1), Self.job(2, in: Self.other)], in: .normal, at: 0, &actions)
        #expect(admission.waitingForSlot.count == 2)

        var revoking = JobAdmission.Actions()
        #expect(admission.revoking([Self.other], in: .normal, &revoking) == 0, "its one job was withdrawn, not running")
        #expect(admission.waitingForSlot.values.map(\.admitted.message.offset) == [1])
        #expect(Self.launched(Self.release(Self.app, in: &admission)) == [1])
    }

    @Test(
        "a consumer thread out of room is woken once the lane has room for a batch, or for any job once fewer than a batch of its jobs run"
    )
    func aLaneOutOfRoomIsWokenForABatch() throws {
        var admission = Self.admission(maximumInFlight: 100, appLimit: 1000)
        var actions = JobAdmission.Actions()
        admission.consumed((0..<100).map { Self.job($0) }, in: .normal, at: 0, &actions)
        #expect(admission.machine.room(in: .normal) == 0, "its read-ahead (100 jobs here) is full")
        admission.consumer(in: .normal, waitsFor: .room)
        var few = JobAdmission.Actions()
        admission.ended(actions.launches.prefix(10).map { JobAdmission.Ending(id: $0.id, completed: true) }, &few)
        #expect(few.woken.isEmpty, "room for 10 jobs while 100 run: not a batch")
        var batch = JobAdmission.Actions()
        admission.ended(
            actions.launches.dropFirst(10).prefix(JobAdmission.refillBatch).map { JobAdmission.Ending(id: $0.id, completed: true) }, &batch)
        #expect(batch.woken == [.normal])
    }

    @Test("a job that ends lets the next start, moves the committed offset and wakes a consumer thread waiting for the lane's jobs, once")
    func anEndingMovesTheOffsetAndFreesCapacity() throws {
        var admission = Self.admission(maximumInFlight: 1, appLimit: 10)
        var actions = JobAdmission.Actions()
        admission.consumed([Self.job(0), Self.job(1)], in: .normal, at: 0, &actions)
        let first = try #require(actions.launches.first)

        admission.consumer(in: .normal, waitsFor: .jobs)
        var ended = JobAdmission.Actions()
        admission.ended([JobAdmission.Ending(id: first.id, completed: true)], &ended)
        #expect(Self.launched(ended) == [1])
        #expect(admission.takeOffsetsToStore(in: .normal) == [Self.partition: 1], "the next offset to consume is stored")
        #expect(admission.takeOffsetsToStore(in: .normal).isEmpty, "taken once")
        #expect(ended.woken == [.normal], "a consumer thread waiting for the lane's jobs is woken by an ending")

        var next = JobAdmission.Actions()
        admission.ended([JobAdmission.Ending(id: ended.launches[0].id, completed: true)], &next)
        #expect(next.woken.isEmpty, "it was woken once: its next wait is its own to announce")
    }
}

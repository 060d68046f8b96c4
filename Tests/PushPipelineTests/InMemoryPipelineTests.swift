import Foundation
import ProxyPlugin
import PushCore
import PushKafka
import Synchronization
import Testing
import PushInMemoryKafka
import TestSupport
@testable import PushPipeline

/// A provider that records, per user, the order of its deliveries and how many ran at once, and
/// holds the deliveries of held users until they are released.
private final class RecordingProvider: PushProvider {
    private struct State {
        var order: [String: [String]] = [:]
        var running: [String: Int] = [:]
        var mostAtOnce: [String: Int] = [:]
        var runningOverall = 0
        var mostAtOnceOverall = 0
        var held: Set<String> = []
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    let id = ProviderID.proxy
    let targetFormat: any TargetFormat = ProxyTargetFormat()
    private let state = Mutex(State())
    private let pause: Duration

    init(pause: Duration = .zero) {
        self.pause = pause
    }

    func scope(of target: Target) -> DeliveryScope { DeliveryScope.app(of: target) }

    func hold(user: String) { state.withLock { _ = $0.held.insert(user) } }

    func releaseAll() {
        let waiting = state.withLock { state in
            state.held = []
            defer { state.waiting = [] }
            return state.waiting
        }
        for waiter in waiting { waiter.resume() }
    }

    var order: [String: [String]] { state.withLock { $0.order } }
    var mostAtOnce: [String: Int] { state.withLock { $0.mostAtOnce } }
    var mostAtOnceOverall: Int { state.withLock { $0.mostAtOnceOverall } }
    var deliveries: Int { state.withLock { $0.order.values.reduce(0) { $0 + $1.count } } }

    func deliver(_ delivery: Delivery) async -> DeliveryResult {
        let user = delivery.job.userId
        state.withLock { state in
            state.order[user, default: []].append(delivery.job.id)
            state.running[user, default: 0] += 1
            state.mostAtOnce[user] = max(state.mostAtOnce[user] ?? 0, state.running[user]!)
            state.runningOverall += 1
            state.mostAtOnceOverall = max(state.mostAtOnceOverall, state.runningOverall)
        }
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let waits = state.withLock { state in
                if state.held.contains(user) { state.waiting.append(waiter) }
                return state.held.contains(user)
            }
            if !waits { waiter.resume() }
        }
        if pause > .zero { try? await Task.sleep(for: pause) }
        state.withLock { state in
            state.running[user]! -= 1
            state.runningOverall -= 1
        }
        return .delivered(providerMessageId: nil, httpStatus: 200)
    }
}

/// A pipeline reading jobs from an in-memory log and publishing into it: the spine's rules without a broker.
/// The waits are long because the suites run side by side on CI's two cores; each ends as soon as its condition holds.
/// The in-memory store, except that recording outcomes fails while `failing` is set.
private final class RecordFailingStore: DeliveryStore {
    private let store = InMemoryDeliveryStore()
    private let state = Mutex((failing: true, refused: 0))

    var refused: Int { state.withLock { $0.refused } }
    func recover() { state.withLock { $0.failing = false } }

    private func refuses() -> Bool {
        state.withLock { state in
            if state.failing { state.refused += 1 }
            return state.failing
        }
    }

    private struct Refused: Error {}

    func prepare(
        _ job: Job, dedupeWindow: Int64, firstDelivery: Bool, completion: @escaping @Sendable (Result<[PriorState], any Error>) -> Void
    ) {
        store.prepare(job, dedupeWindow: dedupeWindow, firstDelivery: firstDelivery, completion: completion)
    }
    func record(_ outcomes: [EncodedOutcome], completion: @escaping @Sendable ((any Error)?) -> Void) {
        if refuses() { return completion(Refused()) }
        store.record(outcomes, completion: completion)
    }
    func recordedOutcome(of job: Job, target: Target) async throws -> Outcome? {
        try await store.recordedOutcome(of: job, target: target)
    }
    func takeMark(of partition: MarkedPartition) async throws -> PartitionMark { try await store.takeMark(of: partition) }
    func advanceMark(of partition: MarkedPartition, fence: Int64, to offset: Int64) async throws -> Bool {
        try await store.advanceMark(of: partition, fence: fence, to: offset)
    }
    func recordCancellation(_ cancel: Job) async throws {
        try await store.recordCancellation(cancel)
    }
    func cancellation(of call: Job, bindingId: String) async throws -> CallCancellation? {
        try await store.cancellation(of: call, bindingId: bindingId)
    }
}

private struct InMemoryHarness {
    let kafka: InMemoryKafka
    let pipeline: DeliveryPipeline
    let processor: JobProcessor
    let registry: ProviderRegistry

    init(
        kafka: InMemoryKafka, provider: any PushProvider, store: any DeliveryStore, group: String = "push-worker",
        configure: (inout PipelineConfiguration) -> Void = { _ in }
    ) {
        self.kafka = kafka
        var configuration = PipelineConfiguration(shutdownGrace: .seconds(2))
        configure(&configuration)
        registry = ProviderRegistry([provider])
        processor = JobProcessor(registry: registry, configuration: configuration, store: store, retryQueue: nil, logger: testLogger())
        pipeline = DeliveryPipeline(
            configuration: configuration, sources: kafka.sources(group: group), sink: kafka.sink,
            processor: processor, logger: testLogger())
    }

    func start() -> Task<Void, any Error> { Task { try await pipeline.run() } }

    func stop(_ running: Task<Void, any Error>) async throws {
        pipeline.stop()
        try await running.value
    }
}

private func appendJobs(_ kafka: InMemoryKafka, users: Int, jobsPerUser: Int, prefix: String = "job") {
    for index in 0..<jobsPerUser {
        for user in 0..<users {
            let id = "\(prefix)-\(user)-\(index)"
            kafka.append(
                KafkaRecord(
                    topic: "push.jobs", key: Array("user-\(user)".utf8),
                    value: jobJSON(id: id, userId: "user-\(user)", targets: [proxyTarget("b-\(user)-\(index)")])))
        }
    }
}

/// A log with the worker's topics and one job for each of six users.
private func sixJobsLog() -> InMemoryKafka {
    let kafka = InMemoryKafka(topics: ["push.jobs": 3, "push.jobs.urgent": 1, "push.outcomes": 2])
    appendJobs(kafka, users: 6, jobsPerUser: 1)
    return kafka
}

/// Runs a worker of the group until it has consumed every job, stops it, and expects every job committed.
private func runToTheEnd(_ kafka: InMemoryKafka, provider: any PushProvider, store: any DeliveryStore) async throws {
    let harness = InMemoryHarness(kafka: kafka, provider: provider, store: store)
    let running = harness.start()
    try await waitUntil(timeout: .seconds(60)) { kafka.position(group: "push-worker") == endOffsets(kafka, "push.jobs") }
    try await harness.stop(running)
    #expect(kafka.committed(group: "push-worker") == endOffsets(kafka, "push.jobs"))
}

/// The next offset of every partition of `topic`: what a group has committed once it has finished everything.
private func endOffsets(_ kafka: InMemoryKafka, _ topic: String) -> [TopicPartition: Int64] {
    kafka.messages(in: topic).reduce(into: [:]) { ends, message in
        ends[message.topicPartition] = max(ends[message.topicPartition] ?? 0, message.offset + 1)
    }
}

/// Wraps each lane's source and notes, for every stored offset, whether the thread storing it is
/// the one that polls that source.
private final class ThreadCheckingSources: MessageSourceFactory {
    struct StoredOffset: Sendable {
        let topicPartition: TopicPartition
        let offset: Int64
        let onPollingThread: Bool
    }

    private final class Log: Sendable {
        let entries = Mutex<[StoredOffset]>([])
    }

    private final class Source: MessageSource {
        let inner: any MessageSource
        let log: Log
        private let pollingThread = Mutex<ObjectIdentifier?>(nil)

        init(inner: any MessageSource, log: Log) {
            self.inner = inner
            self.log = log
        }

        private var onPollingThread: Bool { pollingThread.withLock { $0 == ObjectIdentifier(Thread.current) } }

        func poll(maximum: Int, timeoutMilliseconds: Int32) -> [KafkaMessage] {
            pollingThread.withLock { $0 = ObjectIdentifier(Thread.current) }
            return inner.poll(maximum: maximum, timeoutMilliseconds: timeoutMilliseconds)
        }

        func storeOffset(_ offset: Int64, for topicPartition: TopicPartition) {
            let entry = StoredOffset(topicPartition: topicPartition, offset: offset, onPollingThread: onPollingThread)
            log.entries.withLock { $0.append(entry) }
            inner.storeOffset(offset, for: topicPartition)
        }

        func pauseAll() { inner.pauseAll() }
        func resumeAll() { inner.resumeAll() }
        func pause(_ partitions: [TopicPartition]) { inner.pause(partitions) }
        func resume(_ partitions: [TopicPartition]) { inner.resume(partitions) }
        func close() { inner.close() }
    }

    private let inner: any MessageSourceFactory
    private let log = Log()

    init(_ inner: any MessageSourceFactory) { self.inner = inner }

    var stored: [StoredOffset] { log.entries.withLock { $0 } }

    func makeSource(lane: Lane, topic: String, rebalance: @escaping @Sendable (RebalanceEvent) -> Void) throws -> any MessageSource {
        Source(inner: try inner.makeSource(lane: lane, topic: topic, rebalance: rebalance), log: log)
    }
}

private func outcomeJobIds(_ kafka: InMemoryKafka) -> [String] {
    kafka.messages(in: "push.outcomes").compactMap { message in
        if case .string(let id)? = message.json?["jobId"] { id } else { nil }
    }
}

@Suite("The pipeline against an in-memory source and sink: offsets, order and redelivery without a broker", .serialized)
struct InMemoryPipelineTests {
    @Test(
        "no offset is stored before the sink acknowledges the job's outcome; a stop then leaves every job to the next worker, which does not send again"
    )
    func offsetsWaitForAcknowledgement() async throws {
        let kafka = sixJobsLog()
        let provider = RecordingProvider()
        let store = InMemoryDeliveryStore()
        kafka.holdAcknowledgements()

        let first = InMemoryHarness(kafka: kafka, provider: provider, store: store) { $0.shutdownGrace = .milliseconds(200) }
        let firstRun = first.start()
        try await waitUntil(timeout: .seconds(60)) { kafka.heldSends == 6 }
        #expect(provider.deliveries == 6)
        #expect(kafka.stored(group: "push-worker").isEmpty, "an offset moved before its outcome was acknowledged")
        try await first.stop(firstRun)
        #expect(kafka.committed(group: "push-worker").isEmpty, "a stop committed jobs whose outcomes were never acknowledged")
        kafka.releaseAcknowledgements()

        try await runToTheEnd(kafka, provider: provider, store: store)
        #expect(provider.deliveries == 6, "the redelivered jobs were sent again instead of republishing their recorded outcomes")
        #expect(Set(outcomeJobIds(kafka)) == Set((0..<6).map { "job-\($0)-0" }))
        #expect(outcomeJobIds(kafka).count == 12, "each job's outcome once per worker: held by the first, republished by the second")
    }

    @Test(
        "a stop while the store refuses to record: the jobs waiting to record give up, nothing is published or committed, the next worker finishes them"
    )
    func stopWhileRecordsFail() async throws {
        let kafka = sixJobsLog()
        let provider = RecordingProvider()
        let store = RecordFailingStore()

        let first = InMemoryHarness(kafka: kafka, provider: provider, store: store) { $0.shutdownGrace = .milliseconds(200) }
        let firstRun = first.start()
        try await waitUntil(timeout: .seconds(60)) { provider.deliveries == 6 && store.refused >= 12 }
        let stopping = ContinuousClock.now
        try await first.stop(firstRun)
        // Jobs that never gave up would hold the stop for the drain's last 2 s after the grace.
        #expect(ContinuousClock.now - stopping < .seconds(2), "jobs retrying their record did not give up when the stop cancelled them")
        #expect(outcomeJobIds(kafka).isEmpty, "an outcome was published before it was recorded")
        #expect(kafka.committed(group: "push-worker").isEmpty, "a stop committed jobs whose outcomes were never recorded")

        store.recover()
        try await runToTheEnd(kafka, provider: provider, store: store)
        #expect(Set(outcomeJobIds(kafka)) == Set((0..<6).map { "job-\($0)-0" }))
        #expect(outcomeJobIds(kafka).count == 6)
    }

    @Test("one key's jobs run one at a time in log order while other keys run beside them")
    func perKeyOrder() async throws {
        let kafka = InMemoryKafka(topics: ["push.jobs": 4])
        let provider = RecordingProvider(pause: .milliseconds(2))
        appendJobs(kafka, users: 20, jobsPerUser: 5)
        let harness = InMemoryHarness(kafka: kafka, provider: provider, store: InMemoryDeliveryStore())
        let running = harness.start()
        try await waitUntil(timeout: .seconds(60)) { outcomeJobIds(kafka).count == 100 }
        try await harness.stop(running)

        for user in 0..<20 {
            #expect(provider.order["user-\(user)"] == (0..<5).map { "job-\(user)-\($0)" })
            #expect(provider.mostAtOnce["user-\(user)"] == 1)
        }
        #expect(provider.mostAtOnceOverall > 1, "different keys must not wait for each other")
        #expect(kafka.committed(group: "push-worker") == endOffsets(kafka, "push.jobs"))
    }

    @Test(
        "jobs waiting for their app's slot as values each start once as slots come free: every job sent once, each key in log order, no app beyond its limit, all committed"
    )
    func jobsWaitingForAppSlotsStartOnceEach() async throws {
        let kafka = InMemoryKafka(topics: ["push.jobs": 4])
        let provider = RecordingProvider(pause: .milliseconds(10))
        for index in 0..<3 {
            for user in 0..<60 {
                kafka.append(
                    KafkaRecord(
                        topic: "push.jobs", key: Array("user-\(user)".utf8),
                        value: jobJSON(
                            id: "job-\(user)-\(index)", userId: "user-\(user)",
                            targets: [appTarget("b-\(user)-\(index)", app: "app-\(user % 3)")])))
            }
        }
        let harness = InMemoryHarness(kafka: kafka, provider: provider, store: InMemoryDeliveryStore()) {
            $0.maximumInFlightPerApp = 2
            $0.maximumInFlightJobs = 40
        }
        let running = harness.start()
        var mostWaiting = 0
        try await waitUntil(timeout: .seconds(60)) {
            mostWaiting = max(mostWaiting, harness.pipeline.jobsWaitingForAppSlot)
            return outcomeJobIds(kafka).count == 180
        }
        let waitingAtTheEnd = harness.pipeline.jobsWaitingForAppSlot
        try await harness.stop(running)

        #expect(provider.deliveries == 180, "each job sent once")
        for user in 0..<60 {
            #expect(provider.order["user-\(user)"] == (0..<3).map { "job-\(user)-\($0)" })
        }
        #expect(provider.mostAtOnceOverall <= 6, "three apps, two slots each: \(provider.mostAtOnceOverall) sent at once")
        #expect(mostWaiting > 0, "jobs waited for their app's slot")
        #expect(waitingAtTheEnd == 0)
        #expect(Set(outcomeJobIds(kafka)).count == 180)
        #expect(kafka.committed(group: "push-worker") == endOffsets(kafka, "push.jobs"))
    }

    @Test("a rebalance hands back what was not committed: jobs held past the grace are consumed again and nothing is lost")
    func rebalanceRedelivers() async throws {
        let kafka = InMemoryKafka(topics: ["push.jobs": 2])
        let provider = RecordingProvider()
        provider.hold(user: "user-0")
        appendJobs(kafka, users: 4, jobsPerUser: 3)
        let harness = InMemoryHarness(kafka: kafka, provider: provider, store: InMemoryDeliveryStore()) {
            $0.revocationGrace = .milliseconds(300)
        }
        let running = harness.start()
        try await waitUntil(timeout: .seconds(60)) { Set(outcomeJobIds(kafka)).count == 9 }
        let committedBefore = kafka.committed(group: "push-worker")
        kafka.rebalance(group: "push-worker")
        try await waitUntil(timeout: .seconds(60)) { kafka.committed(group: "push-worker") != committedBefore }
        let held = kafka.committed(group: "push-worker")
        let partitionOfHeldUser = TopicPartition(
            topic: "push.jobs", partition: Int32(InMemoryKafka.partition(of: Array("user-0".utf8), among: 2)))
        #expect(
            held[partitionOfHeldUser, default: 0] < endOffsets(kafka, "push.jobs")[partitionOfHeldUser]!,
            "the held user's partition was committed past its unfinished job")
        provider.releaseAll()
        try await waitUntil(timeout: .seconds(60)) {
            Set(outcomeJobIds(kafka)).count == 12 && kafka.position(group: "push-worker") == endOffsets(kafka, "push.jobs")
        }
        try await harness.stop(running)

        #expect(kafka.committed(group: "push-worker") == endOffsets(kafka, "push.jobs"))
        #expect(provider.order["user-0"]?.prefix(1) == ["job-0-0"])
        #expect(Set(outcomeJobIds(kafka)) == Set((0..<4).flatMap { user in (0..<3).map { "job-\(user)-\($0)" } }))
    }

    @Test("a sink that refuses is tried again until it acknowledges; the offsets wait for it")
    func refusedSendsAreRetried() async throws {
        let kafka = InMemoryKafka(topics: ["push.jobs": 1])
        let provider = RecordingProvider()
        kafka.refuseSends(3)
        appendJobs(kafka, users: 1, jobsPerUser: 2)
        let harness = InMemoryHarness(kafka: kafka, provider: provider, store: InMemoryDeliveryStore())
        let running = harness.start()
        try await waitUntil(timeout: .seconds(60)) { kafka.position(group: "push-worker") == endOffsets(kafka, "push.jobs") }
        try await harness.stop(running)

        #expect(outcomeJobIds(kafka) == ["job-0-0", "job-0-1"])
        #expect(kafka.sends == 5, "3 refused sends of the first job, then one per job")
        #expect(provider.deliveries == 2, "a refused publication must not send the notification again")
    }

    @Test("a store that refuses to record is tried again until it records; each job is then published once and committed")
    func refusedRecordsAreRetried() async throws {
        let kafka = sixJobsLog()
        let provider = RecordingProvider()
        let store = RecordFailingStore()
        let harness = InMemoryHarness(kafka: kafka, provider: provider, store: store)
        let running = harness.start()
        try await waitUntil(timeout: .seconds(60)) { provider.deliveries == 6 && store.refused >= 12 }
        #expect(outcomeJobIds(kafka).isEmpty, "an outcome was published before it was recorded")
        store.recover()
        try await waitUntil(timeout: .seconds(60)) { kafka.position(group: "push-worker") == endOffsets(kafka, "push.jobs") }
        try await harness.stop(running)

        #expect(outcomeJobIds(kafka).sorted() == (0..<6).map { "job-\($0)-0" }, "each job's outcome once, after its record")
        #expect(provider.deliveries == 6, "a refused record must not send the notification again")
        #expect(kafka.committed(group: "push-worker") == endOffsets(kafka, "push.jobs"))
    }

    @Test(
        "a stop while the sink refuses: the jobs waiting to publish give up at once, nothing is committed, the next worker publishes them")
    func stopWhileSendsFail() async throws {
        let kafka = sixJobsLog()
        let provider = RecordingProvider()
        let store = InMemoryDeliveryStore()
        kafka.refuseSends(1_000_000)
        let first = InMemoryHarness(kafka: kafka, provider: provider, store: store) { $0.shutdownGrace = .milliseconds(200) }
        let firstRun = first.start()
        try await waitUntil(timeout: .seconds(60)) { provider.deliveries == 6 && kafka.sends >= 12 }
        let stopping = ContinuousClock.now
        try await first.stop(firstRun)
        #expect(
            ContinuousClock.now - stopping < .seconds(2), "jobs retrying their publication did not give up when the stop cancelled them")
        #expect(kafka.committed(group: "push-worker").isEmpty, "a stop committed jobs whose outcomes were never acknowledged")

        kafka.refuseSends(0)
        try await runToTheEnd(kafka, provider: provider, store: store)
        #expect(Set(outcomeJobIds(kafka)) == Set((0..<6).map { "job-\($0)-0" }))
        #expect(provider.deliveries == 6, "the next worker republished the recorded outcomes instead of sending again")
    }

    @Test("offsets are stored by the thread that polls their lane, never by a job's task, and never move backwards")
    func offsetsStoredByThePollingThread() async throws {
        let kafka = InMemoryKafka(topics: ["push.jobs": 3, "push.jobs.urgent": 1, "push.outcomes": 2])
        let provider = RecordingProvider(pause: .milliseconds(1))
        appendJobs(kafka, users: 40, jobsPerUser: 5)
        let sources = ThreadCheckingSources(kafka.sources(group: "push-worker"))
        let configuration = PipelineConfiguration(shutdownGrace: .seconds(2))
        let registry = ProviderRegistry([provider])
        let processor = JobProcessor(
            registry: registry, configuration: configuration, store: InMemoryDeliveryStore(), retryQueue: nil,
            logger: testLogger())
        let pipeline = DeliveryPipeline(
            configuration: configuration, sources: sources, sink: kafka.sink, processor: processor,
            logger: testLogger())
        let running = Task { try await pipeline.run() }
        try await waitUntil(timeout: .seconds(60)) { kafka.position(group: "push-worker") == endOffsets(kafka, "push.jobs") }
        pipeline.stop()
        try await running.value

        let stored = sources.stored
        #expect(!stored.isEmpty)
        let offThread = stored.filter { !$0.onPollingThread }.count
        #expect(offThread == 0, "\(offThread) of \(stored.count) offsets stored off the polling thread")
        for (partition, offsets) in Dictionary(grouping: stored, by: \.topicPartition) {
            let values = offsets.map(\.offset)
            #expect(values == values.sorted() && Set(values).count == values.count, "\(partition): \(values)")
        }
        #expect(kafka.committed(group: "push-worker") == endOffsets(kafka, "push.jobs"))
    }
}

@Suite("Outcome records on the outcomes topic")
struct OutcomeRecordTests {
    private func outcome(_ binding: String, status: Outcome.Status = .delivered) -> Outcome {
        Outcome(jobId: "j1", userId: "u1", bindingId: binding, provider: .apns, app: "com.example", status: status, attempts: 1, at: 42)
    }

    @Test("each outcome's record carries its own contract JSON, in order, whether the store's encoding came with it or not")
    func recordsKeepEachOutcomesJSON() {
        let publisher = OutcomePublisher(
            producer: InMemoryKafka().sink, outcomesTopic: "push.outcomes", deadLetterTopic: "push.dlq", consumerGroup: "push-worker",
            metrics: PipelineMetrics(), logger: testLogger())
        let recordedEarlier = outcome("b0", status: .rejected)
        let (first, second) = (outcome("b1"), outcome("b2"))
        let deadLetter = Publication.deadLetter(JobRejection(.invalidJSON, "broken"), value: Array("{".utf8), key: nil, source: "t/0@1")
        let publications: [Publication] = [.outcome(recordedEarlier), .outcome(first), deadLetter, .outcome(second)]
        let withEncoding = publisher.records(for: publications, encoded: [EncodedOutcome(first), EncodedOutcome(second)])
        let without = publisher.records(for: publications)
        let mismatched = publisher.records(for: publications, encoded: [EncodedOutcome(second)])
        for records in [withEncoding, without, mismatched] {
            #expect(records.map { $0.topic } == ["push.outcomes", "push.outcomes", "push.dlq", "push.outcomes"])
            #expect(records.map { $0.value } == [recordedEarlier.encoded(), first.encoded(), Array("{".utf8), second.encoded()])
            #expect(records[1].key == Array("b1".utf8))
        }
    }
}

/// A provider with the hot-path port: `start` answers from a thread of its own, as a transport does, until `hold`
/// keeps its answers back (a cancel then answers `cancelled`); `deliver`, the awaited form, answers delivered.
private final class StartingProvider: PushProvider {
    private struct State {
        var starts = 0
        var delivers = 0
        var cancels = 0
        var holding = false
        /// By start.
        var held: [Int: DeliveryCompletion] = [:]
    }

    let id = ProviderID.proxy
    let targetFormat: any TargetFormat = ProxyTargetFormat()
    private let state = Mutex(State())
    private let answers = DispatchQueue(label: "starting-provider")
    private let firstAnswer: DeliveryResult

    init(firstAnswer: DeliveryResult = .delivered(providerMessageId: nil, httpStatus: 200), holding: Bool = false) {
        self.firstAnswer = firstAnswer
        state.withLock { $0.holding = holding }
    }

    var starts: Int { state.withLock { $0.starts } }
    var delivers: Int { state.withLock { $0.delivers } }
    var cancels: Int { state.withLock { $0.cancels } }
    var held: Int { state.withLock { $0.held.count } }

    func deliver(_ delivery: Delivery) async -> DeliveryResult {
        state.withLock { $0.delivers += 1 }
        return .delivered(providerMessageId: nil, httpStatus: 200)
    }

    func start(_ delivery: Delivery, completion: @escaping DeliveryCompletion) -> DeliveryStart {
        let (start, holding) = state.withLock { state in
            state.starts += 1
            if state.holding { state.held[state.starts] = completion }
            return (state.starts, state.holding)
        }
        if !holding { answers.async { [firstAnswer] in completion(firstAnswer) } }
        return .sent(Cancel(provider: self, start: start))
    }

    private struct Cancel: DeliveryInFlight {
        let provider: StartingProvider
        let start: Int

        func cancel() {
            let held = provider.state.withLock { state in
                state.cancels += 1
                return state.held.removeValue(forKey: start)
            }
            held?(.retryable(reason: "request cancelled", httpStatus: nil))
        }
    }
}

@Suite("A job with one target runs with no task while nothing makes it wait", .serialized)
struct TasklessRunTests {
    /// Starts the harness, and once every partition's mark covers `jobs` offsets (a job whose mark is still being
    /// read waits for it on a task), appends them.
    private static func start(
        _ harness: InMemoryHarness, partitions: Int32, appending jobs: (users: Int, perUser: Int)
    ) async throws -> Task<Void, any Error> {
        let running = harness.start()
        let offsets = Int64(jobs.users * jobs.perUser)
        try await waitUntil(timeout: .seconds(60)) {
            (0..<partitions).allSatisfy { partition in
                harness.processor.marks.coveredNow(
                    TopicPartition(topic: "push.jobs", partition: partition), offset: offsets, consumedBefore: false) != nil
            }
        }
        appendJobs(harness.kafka, users: jobs.users, jobsPerUser: jobs.perUser)
        return running
    }

    @Test("a job whose slots it reserved is sent through the provider's start, never an awaited deliver, and committed")
    func sentWithoutTask() async throws {
        let kafka = InMemoryKafka(topics: ["push.jobs": 3, "push.jobs.urgent": 1, "push.outcomes": 2])
        let provider = StartingProvider()
        let harness = InMemoryHarness(kafka: kafka, provider: provider, store: InMemoryDeliveryStore())
        let running = try await Self.start(harness, partitions: 3, appending: (20, 2))
        try await waitUntil(timeout: .seconds(60)) { kafka.position(group: "push-worker") == endOffsets(kafka, "push.jobs") }
        try await harness.stop(running)

        #expect(kafka.committed(group: "push-worker") == endOffsets(kafka, "push.jobs"))
        #expect(provider.starts == 40)
        #expect(provider.delivers == 0)
        #expect(Set(outcomeJobIds(kafka)).count == 40)
        #expect(kafka.messages(in: "push.outcomes").allSatisfy { $0.json?["status"] == .string("delivered") })
    }

    @Test("a retryable answer hands the rest of the job to a task from that send: the retry waits there and goes as an awaited deliver")
    func retryableAnswerResumesOnTask() async throws {
        let kafka = InMemoryKafka(topics: ["push.jobs": 3, "push.jobs.urgent": 1, "push.outcomes": 2])
        let provider = StartingProvider(firstAnswer: .retryable(reason: "busy", httpStatus: 503))
        let harness = InMemoryHarness(kafka: kafka, provider: provider, store: InMemoryDeliveryStore()) {
            $0.retryPolicy = RetryPolicy(baseMilliseconds: 20, maximumMilliseconds: 50, maximumAttempts: 5)
        }
        let running = try await Self.start(harness, partitions: 3, appending: (5, 1))
        try await waitUntil(timeout: .seconds(60)) { kafka.position(group: "push-worker") == endOffsets(kafka, "push.jobs") }
        try await harness.stop(running)

        #expect(provider.starts == 5, "each job's first send, with no task")
        #expect(provider.delivers == 5, "each job's second attempt, on its task")
        let outcomes = kafka.messages(in: "push.outcomes").compactMap(\.json)
        #expect(outcomes.count == 5)
        #expect(outcomes.allSatisfy { $0["status"] == .string("delivered") && $0["attempts"] == .integer(2) })
        #expect(kafka.committed(group: "push-worker") == endOffsets(kafka, "push.jobs"))
    }

    @Test("a stop cancels a request in flight of a job with no task once the grace ends: the job stays uncommitted, nothing is published")
    func drainCancelsRequestInFlight() async throws {
        let kafka = InMemoryKafka(topics: ["push.jobs": 1, "push.outcomes": 1])
        let provider = StartingProvider(holding: true)
        let harness = InMemoryHarness(kafka: kafka, provider: provider, store: InMemoryDeliveryStore()) {
            $0.shutdownGrace = .milliseconds(300)
        }
        let running = try await Self.start(harness, partitions: 1, appending: (3, 1))
        try await waitUntil(timeout: .seconds(60)) { provider.held == 3 }
        try await harness.stop(running)

        #expect(provider.cancels == 3)
        #expect(provider.delivers == 0, "a cancelled job is not sent again by this worker")
        #expect(outcomeJobIds(kafka).isEmpty)
        #expect(kafka.committed(group: "push-worker").values.allSatisfy { $0 == 0 })
    }
}

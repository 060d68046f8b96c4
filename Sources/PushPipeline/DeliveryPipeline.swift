import Foundation
import Logging
import Metrics
import PushCore
import PushKafka
import ServiceLifecycle
import Synchronization
import Tracing

/// The worker's spine: one consumer thread per lane (normal: `jobsTopic`; urgent:
/// `urgentTopic`) consumes batches into a `JobAdmission`, whose state machine decides when each job
/// starts (capacity, the urgent reserve, per-key order) and which offsets to store; a started
/// job runs as a task until its final outcomes are handed to the store to record; once recorded
/// they are published, and the job counts as completed once the broker acknowledged them (no
/// task waits for the store's answer or the broker's). Jobs with the same Kafka key (the user) run one after another within a lane.
///
/// Capacity: `maximumInFlightJobs` bounds the jobs being worked on in both lanes together;
/// `urgentReservedInFlightJobs` of it belong to the urgent lane, which may also take what the
/// normal lane leaves free, while the normal lane never takes the reserved part. A job whose
/// targets wait for their app's slot (`AppConcurrencyLimits`) is parked: it does not count
/// there, only against the lane's read-ahead bound (`readAheadJobs`). A lane at its read-ahead
/// bound stops polling until a job finishes. Each lane's capacity is shared between the apps
/// with jobs in it (see `PipelineStateMachine`): jobs are decoded as they are consumed, so their app is known.
///
/// A job with one target reserves its app slot, and its provider endpoint's, before its task
/// exists: while a slot is taken, the job waits as a value in the slot's queue (a few hundred
/// bytes) and its task starts when the slots are handed to it, so thousands of jobs of a slow
/// app, or beyond what an endpoint's connections carry, cost no suspended tasks. A job waiting
/// for its app's slot is parked; one waiting for its endpoint's is in flight. A stop or a
/// revocation withdraws such waiting jobs at once (they never sent anything).
///
/// The pipeline is `JobAdmission`'s runner: it holds it under one lock with the lanes' consumers, feeds it each
/// event and carries out the actions it leaves (tasks to start, offsets to store, lanes to wake).
public final class DeliveryPipeline: Service, Sendable {
    typealias Machine = JobAdmission.Machine

    private struct LaneTopic: Sendable {
        let lane: Lane
        let topic: String
    }

    /// A lane's consumer as the pipeline drives it.
    private struct LaneConsumer {
        var source: (any MessageSource)?
        /// Paused while the shared store is unavailable.
        var pausedForStore = false
        var lastPoll: ContinuousClock.Instant?
        /// What the lane's reads tell of its lag, sampled every second (`sampleLaneLag`); nil before its thread starts.
        var lag: LaneLag?
    }

    /// What the consumer threads and the job tasks share, under one lock.
    private struct Shared {
        /// Admission, per-key order, offsets, each lane's lifecycle and the app slots.
        var admission: JobAdmission
        var consumers: PerLane<LaneConsumer>

        var machine: Machine {
            _read { yield admission.machine }
        }

        var runningThreads = 0
        var finishedRun: CheckedContinuation<Void, Never>?
    }

    /// The jobs started and not yet handed to the store, so a drain can cancel them. A job is registered before it
    /// starts, so it is always found here until it ends.
    private struct StartedJobs {
        var running: [Machine.JobID: StartedJob] = [:]
        var cancelledLanes: Set<Lane> = []

        /// false: the job's lane was cancelled already, so the job is to be cancelled too.
        mutating func register(_ job: StartedJob) -> Bool {
            if cancelledLanes.contains(job.id.lane) { return false }
            running[job.id] = job
            return true
        }

        mutating func ended(_ id: Machine.JobID) { running.removeValue(forKey: id) }

        mutating func cancel(lane: Lane) -> [StartedJob] {
            cancelledLanes.insert(lane)
            return running.filter { $0.key.lane == lane }.map(\.value)
        }
    }

    private let configuration: PipelineConfiguration
    private let laneTopics: [LaneTopic]
    private let processor: JobProcessor
    private let outcomeHandOff: OutcomeHandOff
    /// Runs the retries that are due (with a shared retry queue); a service of its own beside the pipeline (`services`).
    public let retries: RetryScheduler?
    private let logger: Logger
    private let observer: (any PipelineObserver)?
    private let shared: Locked<Shared>
    private let started = Locked(StartedJobs())
    /// Jobs whose outcomes were acknowledged (or that were abandoned), finished in the state machine in batches.
    private let endedJobs = CombiningInbox<JobAdmission.Ending>()
    /// Signalled for a waiting lane when a job of either lane finishes or parks: its consumer
    /// thread may have room again, or a revocation or stop it waits for may go ahead.
    private let wake: [Lane: DispatchSemaphore]

    /// Where normal jobs' steps with no task run (`NormalStepRunner`).
    private let normalSteps = NormalStepRunner()

    /// Messages taken from the source per poll.
    static let batchSize = 256

    private let messageSources: any MessageSourceFactory

    /// The worker's pipeline: Kafka consumers for the lanes, `producer` for outcomes and dead letters.
    /// - Parameter consumerProperties: complete librdkafka consumer properties of the normal lane (see
    ///   `KafkaConsumer.defaultProperties`); the urgent lane uses them in a group of its own (`KafkaMessageSources`).
    public convenience init(
        configuration: PipelineConfiguration, consumerProperties: [String: String], producer: KafkaProducer,
        processor: JobProcessor, logger: Logger, observer: (any PipelineObserver)? = nil
    ) {
        self.init(
            configuration: configuration,
            sources: KafkaMessageSources(consumerProperties: consumerProperties, metrics: processor.metrics, logger: logger),
            sink: producer, processor: processor, logger: logger, observer: observer)
    }

    /// - Parameters:
    ///   - sources: makes each lane's source (`jobsTopic`, and `urgentTopic` when it is another topic).
    ///   - sink: publishes outcomes and dead letters.
    public init(
        configuration: PipelineConfiguration, sources: any MessageSourceFactory, sink: any MessageSink,
        processor: JobProcessor, logger: Logger, observer: (any PipelineObserver)? = nil
    ) {
        self.configuration = configuration
        self.observer = observer
        messageSources = sources
        var lanes = [LaneTopic(lane: .normal, topic: configuration.jobsTopic)]
        if let urgentTopic = configuration.urgentTopic, urgentTopic != configuration.jobsTopic {
            lanes.append(LaneTopic(lane: .urgent, topic: urgentTopic))
        }
        laneTopics = lanes
        shared = Locked(
            Shared(
                admission: JobAdmission(
                    machine: Machine(limits: .init(configuration), lanes: lanes.map(\.lane)), limits: processor.appLimits,
                    longestSlotWait: configuration.longestSlotWait),
                consumers: PerLane(lanes.map(\.lane)) { _ in LaneConsumer() }))
        wake = Dictionary(uniqueKeysWithValues: lanes.map { ($0.lane, DispatchSemaphore(value: 0)) })
        self.processor = processor
        let publisher = OutcomePublisher(
            producer: sink, outcomesTopic: configuration.outcomesTopic,
            deadLetterTopic: configuration.deadLetterTopic, consumerGroup: configuration.consumerGroup, metrics: processor.metrics,
            logger: logger)
        outcomeHandOff = OutcomeHandOff(processor: processor, publisher: publisher)
        retries = processor.retryQueue.map {
            RetryScheduler(
                queue: $0, processor: processor, publisher: publisher, configuration: configuration, logger: logger,
                observer: observer)
        }
        self.logger = logger
        processor.appLimits.keepQueues(in: self)
    }

    /// Consumed and unfinished jobs of both lanes.
    public var inFlightJobs: Int { shared.withLock { $0.machine.consumed } }

    /// Consumed and unfinished jobs of one lane (queued and parked ones included).
    public func inFlightJobs(in lane: Lane) -> Int { shared.withLock { $0.machine.consumed(in: lane) } }

    /// Jobs waiting for their app's or endpoint's slot before their task started.
    var jobsWaitingForAppSlot: Int { shared.withLock { $0.admission.waitingForSlot.count } }

    /// Jobs started and not yet handed to the store (on a task or running with none).
    var startedJobs: Int { started.withLock { $0.running.count } }

    /// Ready for traffic: every lane joined its group, the shared store answers, not stopping.
    public var readiness: (ready: Bool, reason: String) {
        let (notJoined, stopping) = shared.withLock { ($0.machine.lanesNotJoined, $0.machine.stopRequested) }
        if stopping { return (false, "shutting down") }
        if let lane = notJoined.first {
            return (
                false,
                lane == .normal ? "not yet joined the consumer group" : "the \(lane.rawValue) lane has not yet joined its consumer group"
            )
        }
        if !processor.health.isHealthy { return (false, "shared store (Redis) unavailable") }
        return (true, "ready")
    }

    /// Alive: every lane's consumer thread polled within the last 30 s (or has not started yet).
    public var isAlive: Bool {
        let polls = shared.withLock { shared in Lane.allCases.compactMap { lane in shared.consumers.read(lane) { $0.lastPoll } ?? nil } }
        return polls.allSatisfy { ContinuousClock.now - $0 < .seconds(30) }
    }

    /// The pipeline and its retry scheduler as services, in start order: at a graceful shutdown the pipeline stops
    /// consuming and drains first, then the retries stop. The pipeline returning ends the group gracefully.
    public var services: [ServiceGroupConfiguration.ServiceConfiguration] {
        let retries = retries.map { [ServiceGroupConfiguration.ServiceConfiguration(service: $0, serviceName: "retry scheduler")] } ?? []
        return retries + [
            .init(
                service: self, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup,
                serviceName: "delivery pipeline")
        ]
    }

    /// Consumes until `stop()` or a graceful shutdown; returns after in-flight work finished or was abandoned and the
    /// consumers left their groups. Cancellation stops it the same way (the drain is bounded by the shutdown grace).
    public func run() async throws {
        try await withTaskCancellationOrGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                // The lag is sampled here rather than on the lanes' threads, so a lane whose thread stops shows it.
                group.addTask { [self] in
                    while true {
                        sampleLaneLag()
                        processor.metrics.ready.record(readiness.ready ? 1 : 0)
                        try await Task.sleep(for: Self.lagSamplingInterval)
                    }
                }
                defer { processor.metrics.ready.record(0) }
                normalSteps.start()
                defer { normalSteps.stop() }
                try await consumeUntilStopped()
                group.cancelAll()
            }
        } onCancelOrGracefulShutdown: { [self] in
            stop()
        }
    }

    /// How often each lane's lag is sampled into `push_lane_lag_seconds`, and readiness into `push_worker_ready`.
    static let lagSamplingInterval = Duration.seconds(1)

    /// Records each lane's lag (`LaneLag`: the age of the oldest message it has not started, held or unread) and
    /// returns it (ms); a lane that has not started reading yet has none.
    @discardableResult
    func sampleLaneLag() -> [Lane: Int64] {
        let now = processor.clock()
        let lags = shared.withLock { shared in
            Lane.allCases.reduce(into: [Lane: Int64]()) { lags, lane in
                guard let lag = shared.consumers.read(lane, { $0.lag }) ?? nil else { return }
                lags[lane] = lag.milliseconds(at: now, oldestHeld: shared.machine.oldestHeldTimestamp(in: lane))
            }
        }
        for (lane, milliseconds) in lags { processor.metrics.laneLag(lane, milliseconds: milliseconds) }
        return lags
    }

    private func consumeUntilStopped() async throws {
        var consumers: [(LaneTopic, any MessageSource)] = []
        for source in laneTopics {
            let lane = source.lane
            let consumer = try messageSources.makeSource(lane: lane, topic: source.topic) { [weak self] event in
                self?.handle(event, lane: lane)
            }
            consumers.append((source, consumer))
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let start = processor.clock()
            shared.withLock { shared in
                shared.finishedRun = continuation
                shared.runningThreads = consumers.count
                for (source, consumer) in consumers {
                    shared.consumers[source.lane]!.source = consumer
                    shared.consumers[source.lane]!.lag = LaneLag(startingAt: start)
                }
            }
            for (source, consumer) in consumers {
                NamedThread.start("kafka-\(source.lane.rawValue)") { [self] in
                    // The first outcomes would otherwise wait about a second for a metadata refresh.
                    let unknown = outcomeHandOff.publisher.prepareTopics()
                    if !unknown.isEmpty {
                        logger.warning(
                            "could not look up the outcome topics yet; the first outcomes may wait for a metadata refresh",
                            metadata: ["topics": "\(unknown)"])
                    }
                    consumeLoop(consumer, lane: source.lane)
                    let last = shared.withLock { shared -> CheckedContinuation<Void, Never>? in
                        shared.runningThreads -= 1
                        guard shared.runningThreads == 0 else { return nil }
                        defer { shared.finishedRun = nil }
                        return shared.finishedRun
                    }
                    last?.resume()
                }
            }
        }
    }

    /// Asks the pipeline to stop consuming and wind down; `run()` returns when it has.
    /// Jobs consumed but not started, or waiting for their app's or endpoint's slot, are given up at once
    /// (uncommitted, redelivered).
    public func stop() {
        let dropped = perform { $0.admission.stop(&$1) }
        processor.marks.stop()
        if dropped > 0 { logger.info("stopping: queued jobs left to redelivery", metadata: ["jobs": "\(dropped)"]) }
        for semaphore in wake.values { semaphore.signal() }
    }

    private func consumeLoop(_ consumer: any MessageSource, lane: Lane) {
        let wake = wake[lane]!
        /// Partitions this thread paused for keys whose jobs back up or hold the most memory (the state machine says which).
        var pausedForKeys = Set<TopicPartition>()
        let pausedGauge = Gauge(label: "push_partitions_paused", dimensions: [("lane", lane.rawValue)])
        var nextSlotWaitCheck = ContinuousClock.now
        while true {
            if ContinuousClock.now >= nextSlotWaitCheck {
                startOverdueSlotWaits(in: lane)
                let oldest = shared.withLock { $0.machine.oldestUnfinishedConsumedAt(in: lane) }
                processor.metrics.oldestUncommitted(lane, consumedAt: oldest, now: currentTimeMilliseconds())
                nextSlotWaitCheck = .now + .seconds(1)
            }
            let storeHealthy = processor.health.isHealthy
            let (stopping, pause, resume, room, offsets, keyPauses, load) = shared.withLock { shared in
                let room = shared.machine.room(in: lane)
                let (pause, resume) = shared.consumers.update(lane) { consumer in
                    let pause = !consumer.pausedForStore && !storeHealthy
                    let resume = consumer.pausedForStore && storeHealthy
                    consumer.pausedForStore = !storeHealthy
                    consumer.lastPoll = .now
                    return (pause, resume)
                }!
                if room == 0 { shared.admission.consumer(in: lane, waitsFor: .room) }
                let offsets = shared.admission.takeOffsetsToStore(in: lane)
                return (
                    shared.admission.isStopping(lane), pause, resume, room, offsets, shared.machine.pausedPartitions(in: lane),
                    Load(of: shared.machine, lane: lane)
                )
            }
            let pausedAll = !storeHealthy
            load.report(to: processor.metrics)
            store(offsets, in: consumer)
            if stopping { break }
            if pause {
                consumer.pauseAll()
                logger.debug("consumer paused: shared store unavailable", metadata: ["lane": "\(lane.rawValue)"])
            }
            if resume {
                consumer.resumeAll()
                pausedForKeys = []
                logger.debug("consumer resumed", metadata: ["lane": "\(lane.rawValue)"])
            }
            if keyPauses != pausedForKeys {
                follow(keyPauses, from: pausedForKeys, in: consumer, lane: lane)
                pausedForKeys = keyPauses
                pausedGauge.record(pausedForKeys.count)
            }
            if room == 0 {
                // Not polling leaves the next messages in librdkafka's prefetch queue (bounded by
                // queued.max.messages.kbytes); pausing would purge it and cost a fetch round trip on resume.
                _ = wake.wait(timeout: .now() + .milliseconds(100))
                continue
            }
            let maximum = min(room, Self.batchSize)
            let messages = consumer.poll(maximum: maximum, timeoutMilliseconds: 100)
            // A read of a paused lane shows nothing of what waits: its lag keeps growing from its last read.
            let read = pausedAll ? nil : Read(count: messages.count, maximum: maximum, at: processor.clock())
            guard !messages.isEmpty else {
                if let read {
                    shared.withLock { $0.consumers[lane]!.lag?.read(read.count, of: read.maximum, lastTimestamp: nil, at: read.at) }
                }
                continue
            }
            consumed(messages, lane: lane, read: read)
        }
        drain(lane)
        let (offsets, load) = shared.withLock { ($0.admission.takeOffsetsToStore(in: lane), Load(of: $0.machine, lane: lane)) }
        load.report(to: processor.metrics)
        store(offsets, in: consumer)
        consumer.close()
        logger.info("consumer closed", metadata: ["lane": "\(lane.rawValue)"])
    }

    /// Pauses the partitions a backed-up key holds and resumes those it let go; on the lane's consumer thread only.
    private func follow(_ wanted: Set<TopicPartition>, from paused: Set<TopicPartition>, in consumer: any MessageSource, lane: Lane) {
        let pausing = wanted.subtracting(paused).sorted { $0.partition < $1.partition }
        let resuming = paused.subtracting(wanted).sorted { $0.partition < $1.partition }
        if !pausing.isEmpty {
            consumer.pause(pausing)
            logger.warning(
                "jobs back up behind their keys (a key past its bound, or the keys holding the most of the lane's memory): their partitions paused, the others flow",
                metadata: [
                    "lane": "\(lane.rawValue)", "partitions": "\(pausing.map(\.description))",
                ])
        }
        if !resuming.isEmpty {
            consumer.resume(resuming)
            logger.notice(
                "partitions resumed: the jobs behind their keys went down",
                metadata: [
                    "lane": "\(lane.rawValue)", "partitions": "\(resuming.map(\.description))",
                ])
        }
    }

    /// One poll of a lane's source, for its lag (`LaneLag`).
    private struct Read {
        let count: Int
        let maximum: Int
        let at: Int64
    }

    private func consumed(_ messages: [KafkaMessage], lane: Lane, read: Read?) {
        let metrics = processor.metrics
        let now = currentTimeMilliseconds()
        metrics.consumed.increment(by: messages.count)
        // Decoded here, outside the lock: the state machine shares the lane between the jobs' apps.
        let admitted = messages.map { processor.admit($0, lane: lane) }
        let lastTimestamp = messages.last(where: { $0.timestamp != nil })?.timestamp
        perform { shared, actions in
            if let read { shared.consumers[lane]!.lag?.read(read.count, of: read.maximum, lastTimestamp: lastTimestamp, at: read.at) }
            shared.admission.consumed(admitted, in: lane, at: now, &actions)
        }
    }

    /// The pipeline's load as its gauges show it: recorded by each lane's consumer thread once per pass of its
    /// loop (each batch, or every 100 ms while it waits), not at every job's start and finish.
    private struct Load {
        let consumed: Int
        let consumedInLane: Int
        let heldBytesInLane: Int
        let running: Int
        let lane: Lane

        init(of machine: Machine, lane: Lane) {
            consumed = machine.consumed
            consumedInLane = machine.consumed(in: lane)
            heldBytesInLane = machine.heldBytes(in: lane)
            running = machine.running
            self.lane = lane
        }

        func report(to metrics: PipelineMetrics) {
            metrics.inFlight.record(consumed)
            metrics.laneInFlight(lane, jobs: consumedInLane, bytes: heldBytesInLane)
            metrics.running.record(running)
        }
    }

    /// Runs an admission event under the lock, then carries out the actions it leaves. Returns what the event returned.
    private func perform<Result>(_ event: (inout Shared, inout JobAdmission.Actions) -> Result) -> Result {
        var actions = JobAdmission.Actions()
        let result = shared.withLock { shared in event(&shared, &actions) }
        carryOut(actions)
        return result
    }

    /// Once the shared lock is released: the tasks granted their slots resume, the jobs launched start, waiting lanes wake.
    private func carryOut(_ actions: JobAdmission.Actions) {
        let limits = processor.appLimits
        limits.carryOut(actions.turns)
        for waited in actions.waited { limits.countWait(waited.stage, of: waited.scope) }
        for launch in actions.launches { self.launch(launch) }
        for lane in actions.woken { wake[lane]?.signal() }
    }

    /// On the lane's consumer thread only.
    private func store(_ offsets: [TopicPartition: Int64], in consumer: any MessageSource) {
        for (topicPartition, offset) in offsets { consumer.storeOffset(offset, for: topicPartition) }
    }

    /// Starts the lane's jobs that waited for their slots as values past `longestSlotWait` (`JobAdmission.launchOverdue`).
    private func startOverdueSlotWaits(in lane: Lane) {
        let now = ContinuousClock.now
        perform { $0.admission.launchOverdue(in: lane, at: now, &$1) }
    }

    /// Registers the job and starts it, outside the shared lock: with no task while nothing makes it wait
    /// (`JobProcessor+Taskless.swift`), else on a task.
    private func launch(_ launch: JobAdmission.Launch) {
        let job = StartedJob(pipeline: self, launch)
        if !started.withLock({ $0.register(job) }) { job.cancel() }
        job.step(.start)
    }

    /// A started job: its run (with no task, then perhaps on one), its parking changes (it is the job's `JobParking`)
    /// and its ending reach the pipeline through this one object, rather than through a closure or an object made for
    /// each. A run with no task keeps its state here between the store's answer and the provider's; each step
    /// happens after the one before it (the answer that calls it was asked for by that step).
    final class StartedJob: JobParking, @unchecked Sendable {
        let pipeline: DeliveryPipeline
        let id: Machine.JobID
        let admitted: JobProcessor.AdmittedJob
        /// The slots its first send holds, reserved before it started: its run owns them from its start.
        private var slot: SlotPermit?
        let slotWaitSpent: Bool
        let startedAt = ContinuousClock.now
        /// Set by the run with no task from its start until it ends or a task takes it over.
        private var run: JobProcessor.TasklessRun?
        /// The run's send in flight: its slots and when it left.
        private var sending: (slot: JobProcessor.SendSlot, at: ContinuousClock.Instant)?
        /// What a cancel reaches: the request in flight of the run with no task, or the task that took it over.
        private let cancellation = Mutex(Cancellation())

        private struct Cancellation {
            var cancelled = false
            var inFlight: (any DeliveryInFlight)?
            var task: Task<Void, Never>?
        }

        init(pipeline: DeliveryPipeline, _ launch: JobAdmission.Launch) {
            self.pipeline = pipeline
            id = launch.id
            admitted = launch.admitted
            slot = launch.slot
            slotWaitSpent = launch.slotWaitSpent
        }

        private var processor: JobProcessor { pipeline.processor }

        /// Ends the job's run as soon as it can: its request in flight is cancelled, or its task.
        func cancel() {
            let (inFlight, task) = cancellation.withLock { cancellation in
                cancellation.cancelled = true
                return (cancellation.inFlight.take(), cancellation.task)
            }
            inFlight?.cancel()
            task?.cancel()
        }

        /// Runs a step of the job: an urgent job's at once, on the thread that brings it; a normal job's on the normal
        /// steps' thread (`NormalStepRunner`).
        func step(_ step: NormalStepRunner.Step) {
            if admitted.deliveryLane == .normal { return pipeline.normalSteps.hand(self, step) }
            run(step)
        }

        func run(_ step: NormalStepRunner.Step) {
            switch step {
            case .start: start()
            case .checked(let answer): checked(answer)
            case .answered(let result): answered(result)
            }
        }

        private func start() {
            guard !cancellation.withLock({ $0.cancelled }), let run = processor.tasklessRun(of: admitted, slot: slot) else {
                return startTask { job in await job.runWhole() }
            }
            self.run = run
            processor.store.prepare(run.job, dedupeWindow: run.window, firstDelivery: run.firstDelivery) { [self] answer in
                step(.checked(answer))
            }
        }

        private func source() -> JobProcessor.Source {
            JobProcessor.Source(admitted, parking: self, slot: slot.take(), slotWaitSpent: slotWaitSpent)
        }

        private func checked(_ answer: Result<[PriorState], any Error>) {
            var source = source()
            follow(processor.checked(answer, run!, source: &source), source: source)
        }

        private func follow(_ step: JobProcessor.TasklessStep, source: JobProcessor.Source) {
            let run = run!
            switch step {
            case .finished(let result):
                var source = source
                processor.appLimits.giveBack(&source.slot)
                self.run = nil
                hand(JobProcessor.ProcessedTargets(unlessAbandoned: [result]), span: nil)
            case .resume(let point):
                self.run = nil
                slot = source.slot
                startTask { job in await job.processor.resume(run, from: point, source: job.source()) }
            case .send(let sendSlot, let delivery):
                slot = source.slot
                sending = (sendSlot, ContinuousClock.now)
                switch sendSlot.provider.start(delivery, completion: { [self] result in self.step(.answered(result)) }) {
                case .sent(let inFlight):
                    let cancelled = cancellation.withLock { cancellation in
                        if !cancellation.cancelled { cancellation.inFlight = inFlight }
                        return cancellation.cancelled
                    }
                    if cancelled { inFlight.cancel() }
                case .finished(let result):
                    answered(result)
                case .needsTask:
                    self.run = nil
                    sending = nil
                    startTask { job in
                        await job.processor.resume(run, from: .admitted(sendSlot, holding: true), source: job.source())
                    }
                }
            }
        }

        private func answered(_ result: DeliveryResult) {
            let cancelled = cancellation.withLock { cancellation in
                cancellation.inFlight = nil
                return cancellation.cancelled
            }
            let (sendSlot, sentAt) = sending.take()!
            var source = source()
            let step = processor.answered(result, slot: sendSlot, run!, startedAt: sentAt, source: &source)
            // A drain cancelled the send: the job stays uncommitted, as a cancelled task's does.
            guard !cancelled else {
                processor.appLimits.giveBack(&source.slot)
                run = nil
                return hand(nil, span: nil)
            }
            follow(step, source: source)
        }

        /// The run goes on on a task (the urgent lane's first when the cooperative pool is saturated by a backlog);
        /// a cancel reaches it from now on.
        private func startTask(_ body: @escaping @Sendable (StartedJob) async -> JobProcessor.ProcessedTargets?) {
            let task = Task(priority: id.lane == .urgent ? .high : .medium) { [self] in
                if let tracing = processor.tracing { return await runTraced(tracing, body) }
                hand(await body(self), span: nil)
            }
            let cancelled = cancellation.withLock { cancellation in
                cancellation.task = task
                return cancellation.cancelled
            }
            if cancelled { task.cancel() }
        }

        private func runWhole() async -> JobProcessor.ProcessedTargets? {
            await processor.process(admitted, slot: slot.take(), parking: self, slotWaitSpent: slotWaitSpent)
        }

        @inline(never)
        private func runTraced(
            _ tracing: JobTracing, _ body: @escaping @Sendable (StartedJob) async -> JobProcessor.ProcessedTargets?
        ) async {
            let span = tracing.consumerSpan(of: admitted.message)
            let processed = await ServiceContext.withValue(span.context) { await body(self) }
            hand(processed, span: span)
        }

        /// The run ends here: the store's answer publishes the outcomes (on the store's thread), and the broker's
        /// acknowledgement finishes the job (on the producer's).
        @inline(never)
        private func hand(_ processed: JobProcessor.ProcessedTargets?, span: (any Span)?) {
            pipeline.started.withLock { $0.ended(id) }
            pipeline.outcomeHandOff.finish(processed, span: span, givingUp: givingUp, then: ended)
        }

        @Sendable private func givingUp() -> Bool { pipeline.isCancelled(id.lane) }

        @Sendable private func ended(_ ending: OutcomeHandOff.Ending) {
            guard case .acknowledged(let publications, _, let recordedAt) = ending else { return pipeline.finish(id, completed: false) }
            pipeline.observer?.acknowledged(
                publications, timeline: JobTimeline(started: startedAt, processed: recordedAt), kafkaTimestamp: admitted.message.timestamp)
            pipeline.finish(id, completed: true)
        }

        override func parkingChanged(_ change: JobParking.Change) {
            switch change {
            case .parked, .unparked:
                let parked = change == .parked
                pipeline.perform { $0.admission.parkingChanged(id, parked: parked, &$1) }
            case .keyReleased:
                pipeline.perform { $0.admission.releaseKey(of: id, &$1) }
            }
        }
    }

    /// Whether the drain cancelled the lane's jobs: a job recording or publishing its outcomes gives up at its next failure.
    private func isCancelled(_ lane: Lane) -> Bool { started.withLock { $0.cancelledLanes.contains(lane) } }

    /// The job leaves the state machine, batched with the others that end meanwhile (`endedJobs`).
    private func finish(_ id: Machine.JobID, completed: Bool) {
        endedJobs.handIn(JobAdmission.Ending(id: id, completed: completed)) { ended in
            perform { $0.admission.ended(ended, &$1) }
        }
    }

    /// Runs on the lane's consumer thread inside `poll`.
    private func handle(_ event: RebalanceEvent, lane: Lane) {
        switch event {
        case .assigned(let partitions):
            processor.marks.assigned(partitions)
            shared.withLock { shared in
                shared.admission.assigned(partitions, in: lane)
                // A new assignment is not paused: the consumer thread pauses it again while the store is unavailable.
                shared.consumers[lane]!.pausedForStore = false
            }
        case .revoking(let partitions):
            processor.marks.revoked(partitions)
            _ = perform { $0.admission.revoking(partitions, in: lane, &$1) }
            let deadline = ContinuousClock.now + configuration.revocationGrace
            while waitForJobs(in: lane, until: deadline, while: { $0.running(in: lane, partitions: partitions) > 0 }) {}
            let (abandoned, consumer, offsets) = shared.withLock { shared in
                (
                    shared.admission.revoked(partitions, in: lane), shared.consumers[lane]!.source,
                    shared.admission.takeOffsetsToStore(in: lane)
                )
            }
            // The last offsets of the revoked partitions, stored before they are committed and taken away.
            if let consumer { store(offsets, in: consumer) }
            if abandoned > 0 {
                logger.warning(
                    "partitions revoked with jobs still in flight; they will be redelivered",
                    metadata: ["jobs": "\(abandoned)", "partitions": "\(partitions)", "lane": "\(lane.rawValue)"])
            }
        }
    }

    /// While `condition` holds and `deadline` has not passed, waits for the next finish or park;
    /// false once the condition no longer holds or the deadline passed.
    private func waitForJobs(
        in lane: Lane, until deadline: ContinuousClock.Instant,
        while condition: (Machine) -> Bool
    ) -> Bool {
        let left = deadline - ContinuousClock.now
        guard left > .zero else { return false }
        // Checked and registered under one lock, so a finish in between cannot be missed.
        let holds = shared.withLock { shared in
            let holds = condition(shared.machine)
            if holds { shared.admission.consumer(in: lane, waitsFor: .jobs) }
            return holds
        }
        guard holds else { return false }
        let nanoseconds = left.components.seconds.multiplied(saturating: 1_000_000_000)
            .adding(saturating: left.components.attoseconds / 1_000_000_000)
        _ = wake[lane]!.wait(timeout: .now() + .nanoseconds(Int(clamping: nanoseconds)))
        return true
    }

    /// At stop: wait for the lane's running jobs up to the shutdown grace, then cancel the rest.
    private func drain(_ lane: Lane) {
        let deadline = ContinuousClock.now + configuration.shutdownGrace
        while waitForJobs(in: lane, until: deadline, while: { $0.running(in: lane) > 0 }) {}
        // Jobs waiting for an app slot were given up by `stop()`, which the drain always follows.
        // Jobs recording or publishing their outcomes have no task: cancelling the lane makes them give up at their next failure.
        let remaining = started.withLock { $0.cancel(lane: lane) }
        let inFlight = shared.withLock { $0.machine.running(in: lane) }
        if inFlight > 0 {
            logger.warning(
                "stopping with jobs in flight; they stay uncommitted and will be redelivered",
                metadata: ["jobs": "\(inFlight)", "lane": "\(lane.rawValue)"])
            remaining.forEach { $0.cancel() }
            let cancelDeadline = ContinuousClock.now + .seconds(2)
            while waitForJobs(in: lane, until: cancelDeadline, while: { $0.running(in: lane) > 0 }) {}
        }
    }
}

extension DeliveryPipeline: SlotQueuesHost {
    func withQueues<Result>(_ change: (inout AppConcurrencyLimits.Queues) -> (Result, [AppConcurrencyLimits.Turn]))
        -> (Result, [AppConcurrencyLimits.Turn])
    {
        var actions = JobAdmission.Actions()
        let result = shared.withLock { shared in
            let (result, turns) = change(&shared.admission.slots)
            shared.admission.slotsChanged(turns, &actions)
            return result
        }
        // The caller carries the turns out (`AppConcurrencyLimits.carryOut`).
        let turns = actions.turns
        actions.turns = []
        carryOut(actions)
        return (result, turns)
    }
}

/// Runs the steps of normal jobs with no task (`DeliveryPipeline.StartedJob`: a start, the store's checks answered,
/// the provider's answer) on a thread of its own, one after another in the order they come. The threads that bring the
/// answers (the Redis client's, the HTTP/2 client's, the producer's) then only hand a step in, so an urgent job's
/// answers, whose steps run at once on those threads, never wait behind a backlog of normal jobs' work there. Before
/// `start` and after `stop`, a step runs on the thread that hands it in.
final class NormalStepRunner: Sendable {
    enum Step: Sendable {
        case start
        case checked(Result<[PriorState], any Error>)
        case answered(DeliveryResult)
    }

    private struct State: Sendable {
        var steps: [(DeliveryPipeline.StartedJob, Step)] = []
        var running = false
        var sleeping = false
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)

    func start() {
        state.withLock { $0.running = true }
        NamedThread.start("normal-steps") { [self] in runSteps() }
    }

    /// The thread runs the steps handed in so far, then ends; later steps run on the thread that hands them in.
    func stop() {
        let wakes = state.withLock { state in
            state.running = false
            defer { state.sleeping = false }
            return state.sleeping
        }
        if wakes { wake.signal() }
    }

    func hand(_ job: DeliveryPipeline.StartedJob, _ step: Step) {
        let (queued, wakes) = state.withLock { state -> (Bool, Bool) in
            guard state.running else { return (false, false) }
            state.steps.append((job, step))
            defer { state.sleeping = false }
            return (true, state.sleeping)
        }
        guard queued else { return job.run(step) }
        if wakes { wake.signal() }
    }

    private func runSteps() {
        // Two buffers take turns, so a steady flow of steps allocates nothing.
        var batch: [(DeliveryPipeline.StartedJob, Step)] = []
        while true {
            let next = state.withLock { state -> (stop: Bool, wait: Bool) in
                swap(&batch, &state.steps)
                guard batch.isEmpty else { return (false, false) }
                if !state.running { return (true, false) }
                state.sleeping = true
                return (false, true)
            }
            if next.stop { break }
            if next.wait {
                wake.wait()
                continue
            }
            for (job, step) in batch { job.run(step) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}

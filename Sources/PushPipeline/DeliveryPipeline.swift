import Foundation
import Logging
import PushCore
import PushKafka
import Synchronization

/// The worker's spine: one consumer thread per lane (normal: `jobsTopic`; urgent:
/// `urgentTopic`) feeds jobs to tasks; each job's outcomes are published and acknowledged
/// before its offset may be committed; offsets advance per partition over the contiguous
/// run of finished jobs, each consumer committing its own partitions. Jobs with the same
/// Kafka key (the user) run one after another within a lane.
///
/// Capacity: `maximumInFlightJobs` bounds the jobs being worked on in both lanes together;
/// `urgentReservedInFlightJobs` of it belong to the urgent lane, which may also take what the
/// normal lane leaves free, while the normal lane never takes the reserved part. A job whose
/// targets wait for their app's slot (`AppConcurrencyLimits`) is parked: it does not count
/// there, only against the lane's read-ahead bound (`readAheadJobs`). A lane at its bound
/// stops polling until a job finishes or parks.
public final class DeliveryPipeline: Sendable {
    private struct LaneState {
        var tracker = OffsetTracker()
        /// Consumed and not finished (the read-ahead), parked jobs included.
        var inFlight = 0
        /// Consumed jobs waiting for an app slot.
        var parked = 0
        /// Paused while the shared store is unavailable.
        var paused = false
        /// The lane's consumer thread waits for its `capacityFreed` semaphore.
        var waitingForCapacity = false
        /// The consumer joined its group (an empty assignment counts: an idle spare replica is ready).
        var joined = false
        var lastPoll: ContinuousClock.Instant?
        /// The last running job per Kafka key, so one user's jobs keep their order.
        var tails: [[UInt8]: (sequence: UInt64, task: Task<Void, Never>)] = [:]
        var tasks: [UInt64: Task<Void, Never>] = [:]

        /// Jobs being worked on: holding in-flight capacity.
        var working: Int { inFlight - parked }
    }

    private struct State {
        var lanes: [Lane: LaneState]
        var stopRequested = false
        var sequence: UInt64 = 0

        var inFlight: Int { lanes.values.reduce(0) { $0 + $1.inFlight } }

        /// Whether `lane` may consume one more job now.
        func admits(_ lane: Lane, _ configuration: PipelineConfiguration) -> Bool {
            guard let own = lanes[lane], own.inFlight < configuration.readAheadJobs else { return false }
            let total = configuration.maximumInFlightJobs
            let urgent = lanes[.urgent]?.working ?? 0
            let normal = lanes[.normal]?.working ?? 0
            let reserved = lanes[.urgent] == nil ? 0 : configuration.effectiveUrgentReservedInFlightJobs
            switch lane {
            case .urgent: return urgent < reserved || urgent + normal < total
            case .normal: return normal + max(urgent, reserved) < total
            }
        }

        /// Lanes whose consumer waits for capacity, now woken.
        mutating func wakeWaiting() -> [Lane] {
            var woken: [Lane] = []
            for lane in Lane.allCases where lanes[lane]?.waitingForCapacity == true {
                lanes[lane]?.waitingForCapacity = false
                woken.append(lane)
            }
            return woken
        }
    }

    private struct LaneSource: Sendable {
        let lane: Lane
        let topic: String
        let consumerProperties: [String: String]
    }

    private let configuration: PipelineConfiguration
    private let sources: [LaneSource]
    private let processor: JobProcessor
    private let publisher: OutcomePublisher
    private let retryScheduler: RetryScheduler?
    private let logger: Logger
    private let observer: (any PipelineObserver)?
    private let state: Mutex<State>
    private let consumerFinished = DispatchSemaphore(value: 0)
    private let capacityFreed: [Lane: DispatchSemaphore]

    /// The urgent lane's consumer group: the normal group's id with this suffix, so a rebalance
    /// of one lane (which waits for its revoked jobs) never stalls the other.
    public static let urgentGroupSuffix = ".urgent"
    /// The urgent consumer's `fetch.wait.max.ms` ceiling.
    public static let urgentFetchWaitMilliseconds = 10

    /// - Parameters:
    ///   - consumerProperties: complete librdkafka consumer properties of the normal lane (see
    ///     `KafkaConsumer.defaultProperties`); the urgent lane uses them with `group.id` + `urgentGroupSuffix`.
    ///   - producer: publishes outcomes and dead letters.
    public init(configuration: PipelineConfiguration, consumerProperties: [String: String], producer: KafkaProducer,
                processor: JobProcessor, logger: Logger, observer: (any PipelineObserver)? = nil) {
        self.configuration = configuration
        self.observer = observer
        var sources = [LaneSource(lane: .normal, topic: configuration.jobsTopic, consumerProperties: consumerProperties)]
        if let urgentTopic = configuration.urgentTopic, urgentTopic != configuration.jobsTopic {
            var properties = consumerProperties
            properties["group.id"] = (properties["group.id"] ?? "push-worker") + Self.urgentGroupSuffix
            // A broker answers a fetch as soon as data arrives, but one that holds an empty fetch for its
            // whole wait (librdkafka's mock cluster) would add up to this much to every call.
            properties["fetch.wait.max.ms"] = properties["fetch.wait.max.ms"].flatMap(Int.init).map { String(min($0, Self.urgentFetchWaitMilliseconds)) }
                ?? String(Self.urgentFetchWaitMilliseconds)
            sources.append(LaneSource(lane: .urgent, topic: urgentTopic, consumerProperties: properties))
        }
        self.sources = sources
        state = Mutex(State(lanes: Dictionary(uniqueKeysWithValues: sources.map { ($0.lane, LaneState()) })))
        capacityFreed = Dictionary(uniqueKeysWithValues: sources.map { ($0.lane, DispatchSemaphore(value: 0)) })
        self.processor = processor
        let publisher = OutcomePublisher(producer: producer, outcomesTopic: configuration.outcomesTopic,
                                         deadLetterTopic: configuration.deadLetterTopic, metrics: processor.metrics, logger: logger)
        self.publisher = publisher
        retryScheduler = processor.retryQueue.map {
            RetryScheduler(queue: $0, processor: processor, publisher: publisher, configuration: configuration, logger: logger,
                           observer: observer)
        }
        self.logger = logger
    }

    /// Consumed and unfinished jobs of both lanes.
    public var inFlightJobs: Int { state.withLock { $0.inFlight } }

    /// Consumed and unfinished jobs of one lane (parked ones included).
    public func inFlightJobs(in lane: Lane) -> Int { state.withLock { $0.lanes[lane]?.inFlight ?? 0 } }

    /// Ready for traffic: every lane joined its group, the shared store answers, not stopping.
    public var readiness: (ready: Bool, reason: String) {
        let (notJoined, stopping) = state.withLock { state in
            (state.lanes.filter { !$0.value.joined }.keys.sorted { $0.rawValue < $1.rawValue }, state.stopRequested)
        }
        if stopping { return (false, "shutting down") }
        if let lane = notJoined.first {
            return (false, lane == .normal ? "not yet joined the consumer group" : "the \(lane.rawValue) lane has not yet joined its consumer group")
        }
        if !processor.health.isHealthy { return (false, "shared store (Redis) unavailable") }
        return (true, "ready")
    }

    /// Alive: every lane's consumer thread polled within the last 30 s (or has not started yet).
    public var isAlive: Bool {
        let polls = state.withLock { $0.lanes.values.compactMap(\.lastPoll) }
        return polls.allSatisfy { ContinuousClock.now - $0 < .seconds(30) }
    }

    /// Consumes until `stop()`; returns after in-flight work finished or was abandoned and the consumers left their groups.
    public func run() async throws {
        let metrics = processor.metrics
        var consumers: [(LaneSource, KafkaConsumer)] = []
        for source in sources {
            let lane = source.lane
            let consumer = try KafkaConsumer(properties: source.consumerProperties, topics: [source.topic], logger: logger,
                                             statistics: { json in
                                                 for (topic, partition, lag) in ConsumerLag.parse(json) {
                                                     metrics.consumerLag(topic: topic, partition: partition, messages: lag)
                                                 }
                                             }) { [weak self] event in self?.handle(event, lane: lane) }
            consumers.append((source, consumer))
        }
        for (source, consumer) in consumers {
            let thread = Thread { [self] in
                // The first outcomes would otherwise wait about a second for a metadata refresh.
                let unknown = publisher.prepareTopics()
                if !unknown.isEmpty {
                    logger.warning("could not look up the outcome topics yet; the first outcomes may wait for a metadata refresh",
                                   metadata: ["topics": "\(unknown)"])
                }
                consumeLoop(consumer, lane: source.lane)
                consumerFinished.signal()
            }
            thread.name = "kafka-\(source.lane.rawValue)"
            thread.start()
        }
        let retries = retryScheduler.map { scheduler in Task { await scheduler.run() } }
        let count = consumers.count
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [consumerFinished] in
                for _ in 0..<count { consumerFinished.wait() }
                continuation.resume()
            }
        }
        retries?.cancel()
        await retries?.value
    }

    /// Asks the pipeline to stop consuming and wind down; `run()` returns when it has.
    public func stop() {
        state.withLock { $0.stopRequested = true }
    }

    private func consumeLoop(_ consumer: KafkaConsumer, lane: Lane) {
        let capacityFreed = capacityFreed[lane]!
        while true {
            let storeHealthy = processor.health.isHealthy
            let (stopping, pause, resume, atCapacity) = state.withLock { state in
                let paused = state.lanes[lane]!.paused
                let pause = !paused && !storeHealthy
                let resume = paused && storeHealthy
                if pause { state.lanes[lane]!.paused = true }
                if resume { state.lanes[lane]!.paused = false }
                let atCapacity = !state.admits(lane, configuration)
                state.lanes[lane]!.waitingForCapacity = atCapacity
                state.lanes[lane]!.lastPoll = .now
                return (state.stopRequested, pause, resume, atCapacity)
            }
            if stopping { break }
            if pause { consumer.pauseAll(); logger.debug("consumer paused: shared store unavailable", metadata: ["lane": "\(lane.rawValue)"]) }
            if resume { consumer.resumeAll(); logger.debug("consumer resumed", metadata: ["lane": "\(lane.rawValue)"]) }
            if atCapacity {
                // Not polling leaves the next messages in librdkafka's prefetch queue (bounded by
                // queued.max.messages.kbytes); pausing would purge it and cost a fetch round trip on resume.
                _ = capacityFreed.wait(timeout: .now() + .milliseconds(100))
                continue
            }
            guard let message = consumer.poll(timeoutMilliseconds: 100) else { continue }
            start(message, lane: lane, consumer: consumer)
        }
        drain(lane)
        consumer.close()
        logger.info("consumer closed", metadata: ["lane": "\(lane.rawValue)"])
    }

    private func start(_ message: KafkaMessage, lane: Lane, consumer: KafkaConsumer) {
        let metrics = processor.metrics
        if let timestamp = message.timestamp { metrics.laneLag(lane, milliseconds: max(currentTimeMilliseconds().subtracting(saturating: timestamp), 0)) }
        let parking = JobParking { [weak self] parked in self?.parkingChanged(lane, parked: parked) }
        state.withLock { state in
            state.sequence += 1
            let sequence = state.sequence
            let generation = state.lanes[lane]!.tracker.begin(message.topicPartition, offset: message.offset)
            state.lanes[lane]!.inFlight += 1
            metrics.consumed.increment()
            metrics.inFlight.record(state.inFlight)
            metrics.laneInFlight(lane, jobs: state.lanes[lane]!.inFlight)
            let previous = message.key.flatMap { state.lanes[lane]!.tails[$0]?.task }
            let consumedAt = ContinuousClock.now
            // The urgent lane's tasks run first when the cooperative pool is saturated by a backlog.
            let task = Task(priority: lane == .urgent ? .high : .medium) { [self] in
                await previous?.value
                var completed = false
                if case .publish(let publications, _) = await processor.process(message, lane: lane, parking: parking) {
                    completed = await publisher.publish(publications)
                    if completed { observer?.acknowledged(publications, consumedAt: consumedAt, kafkaTimestamp: message.timestamp) }
                }
                finish(message, lane: lane, sequence: sequence, generation: generation, completed: completed, consumer: consumer)
            }
            state.lanes[lane]!.tasks[sequence] = task
            if let key = message.key { state.lanes[lane]!.tails[key] = (sequence, task) }
        }
    }

    /// A job started or stopped waiting for an app slot: parked jobs free in-flight capacity.
    private func parkingChanged(_ lane: Lane, parked: Bool) {
        let woken = state.withLock { state -> [Lane] in
            state.lanes[lane]!.parked += parked ? 1 : -1
            return parked ? state.wakeWaiting() : []
        }
        for lane in woken { capacityFreed[lane]?.signal() }
    }

    private func finish(_ message: KafkaMessage, lane: Lane, sequence: UInt64, generation: UInt64, completed: Bool,
                        consumer: KafkaConsumer) {
        let woken = state.withLock { state -> [Lane] in
            state.lanes[lane]!.inFlight -= 1
            processor.metrics.inFlight.record(state.inFlight)
            processor.metrics.laneInFlight(lane, jobs: state.lanes[lane]!.inFlight)
            state.lanes[lane]!.tasks[sequence] = nil
            if let key = message.key, state.lanes[lane]!.tails[key]?.sequence == sequence { state.lanes[lane]!.tails[key] = nil }
            if completed,
               let offset = state.lanes[lane]!.tracker.finish(message.topicPartition, offset: message.offset, generation: generation) {
                consumer.storeOffset(offset, for: message.topicPartition)
            }
            return state.wakeWaiting()
        }
        for lane in woken { capacityFreed[lane]?.signal() }
    }

    /// Runs on the lane's consumer thread inside `poll`.
    private func handle(_ event: RebalanceEvent, lane: Lane) {
        switch event {
        case .assigned(let partitions):
            state.withLock { state in
                state.lanes[lane]!.tracker.assign(partitions)
                state.lanes[lane]!.paused = false
                state.lanes[lane]!.joined = true
            }
        case .revoking(let partitions):
            let deadline = ContinuousClock.now + configuration.revocationGrace
            while state.withLock({ $0.lanes[lane]!.tracker.inFlight(in: partitions) }) > 0, ContinuousClock.now < deadline {
                Thread.sleep(forTimeInterval: 0.01)
            }
            let abandoned = state.withLock { state in
                defer { state.lanes[lane]!.tracker.revoke(partitions) }
                return state.lanes[lane]!.tracker.inFlight(in: partitions)
            }
            if abandoned > 0 {
                logger.warning("partitions revoked with jobs still in flight; they will be redelivered",
                               metadata: ["jobs": "\(abandoned)", "partitions": "\(partitions)", "lane": "\(lane.rawValue)"])
            }
        }
    }

    /// At stop: wait for the lane's in-flight jobs up to the shutdown grace, then cancel the rest.
    private func drain(_ lane: Lane) {
        let deadline = ContinuousClock.now + configuration.shutdownGrace
        while state.withLock({ $0.lanes[lane]!.inFlight }) > 0, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        let remaining = state.withLock { Array($0.lanes[lane]!.tasks.values) }
        if !remaining.isEmpty {
            logger.warning("stopping with jobs in flight; they stay uncommitted and will be redelivered",
                           metadata: ["jobs": "\(remaining.count)", "lane": "\(lane.rawValue)"])
            remaining.forEach { $0.cancel() }
            let cancelDeadline = ContinuousClock.now + .seconds(2)
            while state.withLock({ $0.lanes[lane]!.inFlight }) > 0, ContinuousClock.now < cancelDeadline {
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
    }
}

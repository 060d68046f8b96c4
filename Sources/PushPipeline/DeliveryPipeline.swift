import Foundation
import Logging
import PushCore
import PushKafka
import Synchronization

/// The worker's spine: a consumer thread feeds jobs to tasks; each job's outcomes are
/// published and acknowledged before its offset may be committed; offsets advance per
/// partition over the contiguous run of finished jobs; too many jobs in flight pause
/// the consumer. Jobs with the same Kafka key (the user) run one after another.
public final class DeliveryPipeline: Sendable {
    private struct State {
        var tracker = OffsetTracker()
        var inFlight = 0
        /// Paused while the shared store is unavailable.
        var paused = false
        /// The consumer thread waits for `capacityFreed` (in-flight limit reached).
        var waitingForCapacity = false
        var stopRequested = false
        /// The consumer joined its group (an empty assignment counts: an idle spare replica is ready).
        var joined = false
        var lastPoll: ContinuousClock.Instant?
        var sequence: UInt64 = 0
        /// The last running job per Kafka key, so one user's jobs keep their order.
        var tails: [[UInt8]: (sequence: UInt64, task: Task<Void, Never>)] = [:]
        var tasks: [UInt64: Task<Void, Never>] = [:]
    }

    private let configuration: PipelineConfiguration
    private let consumerProperties: [String: String]
    private let processor: JobProcessor
    private let publisher: OutcomePublisher
    private let retryScheduler: RetryScheduler?
    private let logger: Logger
    private let observer: (any PipelineObserver)?
    private let state = Mutex(State())
    private let consumerFinished = DispatchSemaphore(value: 0)
    private let capacityFreed = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - consumerProperties: complete librdkafka consumer properties (see `KafkaConsumer.defaultProperties`).
    ///   - producer: publishes outcomes and dead letters.
    public init(configuration: PipelineConfiguration, consumerProperties: [String: String], producer: KafkaProducer,
                processor: JobProcessor, logger: Logger, observer: (any PipelineObserver)? = nil) {
        self.configuration = configuration
        self.observer = observer
        self.consumerProperties = consumerProperties
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

    public var inFlightJobs: Int { state.withLock { $0.inFlight } }

    /// Ready for traffic: joined the group, the shared store answers, not stopping.
    public var readiness: (ready: Bool, reason: String) {
        let (joined, stopping) = state.withLock { ($0.joined, $0.stopRequested) }
        if stopping { return (false, "shutting down") }
        if !joined { return (false, "not yet joined the consumer group") }
        if !processor.health.isHealthy { return (false, "shared store (Redis) unavailable") }
        return (true, "ready")
    }

    /// Alive: the consumer thread polled within the last 30 s (or has not started yet).
    public var isAlive: Bool {
        guard let lastPoll = state.withLock({ $0.lastPoll }) else { return true }
        return ContinuousClock.now - lastPoll < .seconds(30)
    }

    /// Consumes until `stop()`; returns after in-flight work finished or was abandoned and the consumer left the group.
    public func run() async throws {
        let metrics = processor.metrics

        let consumer = try KafkaConsumer(properties: consumerProperties, topics: [configuration.jobsTopic], logger: logger,
                                         statistics: { json in
                                             for (topic, partition, lag) in ConsumerLag.parse(json) {
                                                 metrics.consumerLag(topic: topic, partition: partition, messages: lag)
                                             }
                                         }) { [weak self] event in self?.handle(event) }
        let thread = Thread { [self] in
            let unknown = publisher.prepareTopics()
            if !unknown.isEmpty {
                logger.warning("could not look up the outcome topics yet; the first outcomes may wait for a metadata refresh",
                               metadata: ["topics": "\(unknown)"])
            }
            consumeLoop(consumer)
            consumerFinished.signal()
        }
        thread.name = "kafka-consumer"
        thread.start()
        let retries = retryScheduler.map { scheduler in Task { await scheduler.run() } }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async { [consumerFinished] in
                consumerFinished.wait()
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

    private func consumeLoop(_ consumer: KafkaConsumer) {
        while true {
            let storeHealthy = processor.health.isHealthy
            let (stopping, pause, resume, atCapacity) = state.withLock { state in
                let pause = !state.paused && !storeHealthy
                let resume = state.paused && storeHealthy
                if pause { state.paused = true }
                if resume { state.paused = false }
                let atCapacity = state.inFlight >= configuration.maximumInFlightJobs
                state.waitingForCapacity = atCapacity
                state.lastPoll = .now
                return (state.stopRequested, pause, resume, atCapacity)
            }
            if stopping { break }
            if pause { consumer.pauseAll(); logger.debug("consumer paused: shared store unavailable") }
            if resume { consumer.resumeAll(); logger.debug("consumer resumed") }
            if atCapacity {
                // Not polling leaves the next messages in librdkafka's prefetch queue (bounded by
                // queued.max.messages.kbytes); pausing would purge it and cost a fetch round trip on resume.
                _ = capacityFreed.wait(timeout: .now() + .milliseconds(100))
                continue
            }
            guard let message = consumer.poll(timeoutMilliseconds: 100) else { continue }
            start(message, consumer: consumer)
        }
        drain()
        consumer.close()
        logger.info("consumer closed")
    }

    private func start(_ message: KafkaMessage, consumer: KafkaConsumer) {
        state.withLock { state in
            state.sequence += 1
            let sequence = state.sequence
            let generation = state.tracker.begin(message.topicPartition, offset: message.offset)
            state.inFlight += 1
            processor.metrics.consumed.increment()
            processor.metrics.inFlight.record(state.inFlight)
            let previous = message.key.flatMap { state.tails[$0]?.task }
            let consumedAt = ContinuousClock.now
            let task = Task { [self] in
                await previous?.value
                var completed = false
                if case .publish(let publications, _) = await processor.process(message) {
                    completed = await publisher.publish(publications)
                    if completed { observer?.acknowledged(publications, consumedAt: consumedAt, kafkaTimestamp: message.timestamp) }
                }
                finish(message, sequence: sequence, generation: generation, completed: completed, consumer: consumer)
            }
            state.tasks[sequence] = task
            if let key = message.key { state.tails[key] = (sequence, task) }
        }
    }

    private func finish(_ message: KafkaMessage, sequence: UInt64, generation: UInt64, completed: Bool, consumer: KafkaConsumer) {
        let wakeConsumer = state.withLock { state -> Bool in
            state.inFlight -= 1
            processor.metrics.inFlight.record(state.inFlight)
            state.tasks[sequence] = nil
            if let key = message.key, state.tails[key]?.sequence == sequence { state.tails[key] = nil }
            if completed, let offset = state.tracker.finish(message.topicPartition, offset: message.offset, generation: generation) {
                consumer.storeOffset(offset, for: message.topicPartition)
            }
            defer { state.waitingForCapacity = false }
            return state.waitingForCapacity
        }
        if wakeConsumer { capacityFreed.signal() }
    }

    /// Runs on the consumer thread inside `poll`.
    private func handle(_ event: RebalanceEvent) {
        switch event {
        case .assigned(let partitions):
            state.withLock { state in
                state.tracker.assign(partitions)
                state.paused = false
                state.joined = true
            }
        case .revoking(let partitions):
            let deadline = ContinuousClock.now + configuration.revocationGrace
            while state.withLock({ $0.tracker.inFlight(in: partitions) }) > 0, ContinuousClock.now < deadline {
                Thread.sleep(forTimeInterval: 0.01)
            }
            let abandoned = state.withLock { state in
                defer { state.tracker.revoke(partitions) }
                return state.tracker.inFlight(in: partitions)
            }
            if abandoned > 0 {
                logger.warning("partitions revoked with jobs still in flight; they will be redelivered",
                               metadata: ["jobs": "\(abandoned)", "partitions": "\(partitions)"])
            }
        }
    }

    /// At stop: wait for in-flight jobs up to the shutdown grace, then cancel the rest.
    private func drain() {
        let deadline = ContinuousClock.now + configuration.shutdownGrace
        while state.withLock({ $0.inFlight }) > 0, ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        let remaining = state.withLock { Array($0.tasks.values) }
        if !remaining.isEmpty {
            logger.warning("stopping with jobs in flight; they stay uncommitted and will be redelivered",
                           metadata: ["jobs": "\(remaining.count)"])
            remaining.forEach { $0.cancel() }
            let cancelDeadline = ContinuousClock.now + .seconds(2)
            while state.withLock({ $0.inFlight }) > 0, ContinuousClock.now < cancelDeadline {
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
    }
}

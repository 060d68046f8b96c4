import Logging
import PushCore
import Synchronization

/// Every replica runs one: it claims due retries from the shared queue (a lease per
/// entry), runs them through the processor, publishes their outcomes and completes them.
/// An entry this worker cannot finish (stop, crash) is due again when its lease ends.
final class RetryScheduler: Sendable {
    private let queue: any RetryQueue
    private let processor: JobProcessor
    private let publisher: OutcomePublisher
    private let observer: (any PipelineObserver)?
    private let configuration: PipelineConfiguration
    private let logger: Logger
    private let running = Mutex<[String: Task<Void, Never>]>([:])
    static let idlePoll = Duration.milliseconds(200)

    init(queue: any RetryQueue, processor: JobProcessor, publisher: OutcomePublisher, configuration: PipelineConfiguration,
         logger: Logger, observer: (any PipelineObserver)? = nil) {
        self.queue = queue
        self.observer = observer
        self.processor = processor
        self.publisher = publisher
        self.configuration = configuration
        self.logger = logger
    }

    var inFlight: Int { running.withLock { $0.count } }

    /// Claims and runs due retries until cancelled; then cancels what is running (their leases will expire).
    func run() async {
        while !Task.isCancelled {
            let capacity = configuration.maximumConcurrentRetries - inFlight
            var claimed: [RetryEntry] = []
            if capacity > 0 {
                do {
                    claimed = try await queue.claimDue(now: processor.clock(), limit: capacity, lease: configuration.retryLease)
                } catch {
                    logger.warning("claiming due retries failed", metadata: ["error": "\(error)"])
                }
            }
            if !claimed.isEmpty { processor.metrics.retriesClaimed.increment(by: claimed.count) }
            for entry in claimed { start(entry) }
            if claimed.isEmpty { try? await Task.sleep(for: Self.idlePoll) }
        }
        let tasks = running.withLock { Array($0.values) }
        tasks.forEach { $0.cancel() }
        for task in tasks { await task.value }
    }

    private func start(_ entry: RetryEntry) {
        running.withLock { tasks in
            guard tasks[entry.id] == nil else { return }
            tasks[entry.id] = Task { [self] in
                await handle(entry)
                let remaining = running.withLock { tasks -> Int in
                    tasks.removeValue(forKey: entry.id)
                    return tasks.count
                }
                processor.metrics.retriesInFlight.record(remaining)
            }
            processor.metrics.retriesInFlight.record(tasks.count)
        }
    }

    private func handle(_ entry: RetryEntry) async {
        guard case .publish(let publications, let handedOff) = await processor.processRetry(entry) else { return }
        guard await publisher.publish(publications) else { return }
        observer?.acknowledged(publications, timeline: nil, kafkaTimestamp: entry.fallbackCreatedAt)
        if !handedOff {
            _ = await processor.withStore { try await self.queue.complete(entry.id) }
        }
    }
}

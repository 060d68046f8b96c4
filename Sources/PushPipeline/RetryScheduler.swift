import Logging
import PushCore
import ServiceLifecycle
import Synchronization

/// Every replica runs one: it claims due retries from the shared queue (a lease per
/// entry), runs them through the processor, publishes their outcomes and completes them.
/// While an entry runs its lease is renewed every third of the lease, all of them in one call (one round trip per
/// Redis node), so a retry waiting for a slot, DNS or the store is never taken over by another replica. A renewal
/// that finds the lease lost (it lapsed, say while Redis was unreachable, and another replica claimed the entry)
/// is logged: the retry still finishes here and its outcome goes out, so that delivery may go out twice.
/// An entry this worker cannot finish (stop, crash) is due again when its lease ends.
public final class RetryScheduler: Service, Sendable {
    private let queue: any RetryQueue
    private let processor: JobProcessor
    private let outcomeHandOff: OutcomeHandOff
    private let observer: (any PipelineObserver)?
    private let configuration: PipelineConfiguration
    private let logger: Logger
    private let running = Mutex<[String: Running]>([:])
    static let idlePoll = Duration.milliseconds(200)
    /// However short a lease is configured, renewals do not come closer together (a zero lease would spin).
    static let shortestRenewalInterval = Duration.milliseconds(100)

    /// An entry being run, and the lease it is held under (nil once a renewal found it lost: not renewed again).
    private struct Running {
        var task: Task<Void, Never>
        var lease: RetryLease?
    }

    init(
        queue: any RetryQueue, processor: JobProcessor, publisher: OutcomePublisher, configuration: PipelineConfiguration,
        logger: Logger, observer: (any PipelineObserver)? = nil
    ) {
        self.queue = queue
        self.observer = observer
        self.processor = processor
        outcomeHandOff = OutcomeHandOff(processor: processor, publisher: publisher)
        self.configuration = configuration
        self.logger = logger
    }

    var inFlight: Int { running.withLock { $0.count } }

    /// Claims and runs due retries until cancelled or a graceful shutdown, renewing the leases of those running;
    /// then cancels what is running (their leases will expire).
    public func run() async {
        await cancelWhenGracefulShutdown { [self] in await claimUntilCancelled() }
    }

    private func claimUntilCancelled() async {
        let renewals = Task { [self] in await renewLeases() }
        let sampling = Task { [self] in await sampleDepth() }
        while !Task.isCancelled {
            let capacity = configuration.maximumConcurrentRetries - inFlight
            var claimed: [RetryClaim] = []
            if capacity > 0 {
                do {
                    claimed = try await queue.claimDue(limit: capacity, lease: configuration.retryLease)
                } catch {
                    logger.warning("claiming due retries failed", metadata: ["error": "\(error)"])
                }
            }
            if !claimed.isEmpty { processor.metrics.retriesClaimed.increment(by: claimed.count) }
            for claim in claimed { start(claim) }
            if claimed.isEmpty { try? await Task.sleep(for: Self.idlePoll) }
        }
        renewals.cancel()
        sampling.cancel()
        await renewals.value
        await sampling.value
        let tasks = running.withLock { $0.values.map(\.task) }
        tasks.forEach { $0.cancel() }
        for task in tasks { await task.value }
    }

    /// How often the queue's depth is sampled, and how long past its due time an unclaimed entry counts as overdue.
    static let depthSampling = Duration.seconds(5)
    static let overdueAfter = Duration.seconds(30)

    /// Until cancelled: the queue's entries and overdue entries, for `push_retry_queue_entries` and
    /// `push_retry_queue_overdue_entries`. A failed sample leaves the gauges as they were (the store's own metrics say why).
    private func sampleDepth() async {
        while !Task.isCancelled {
            if let depth = try? await queue.depth(overdueAfter: Self.overdueAfter) {
                processor.metrics.retryQueueEntries.record(depth.entries)
                processor.metrics.retryQueueOverdue.record(depth.overdue)
            }
            try? await Task.sleep(for: Self.depthSampling)
        }
    }

    /// Every third of the lease, until cancelled: renews the leases of the entries running.
    private func renewLeases() async {
        let interval = max(configuration.retryLease / 3, Self.shortestRenewalInterval)
        while !Task.isCancelled {
            try? await Task.sleep(for: interval)
            await renewOnce()
        }
    }

    /// One renewal of every lease held now.
    func renewOnce() async {
        let held = running.withLock { $0.values.compactMap(\.lease) }
        guard !held.isEmpty else { return }
        let renewed: [RetryLease?]
        do {
            renewed = try await queue.renew(held, for: configuration.retryLease)
        } catch {
            // Tried again in a third of the lease; two failures in a row still leave a third of it.
            logger.warning("renewing retry leases failed", metadata: ["error": "\(error)", "leases": "\(held.count)"])
            return
        }
        let lost = running.withLock { running in
            var lost: [String] = []
            for (previous, now) in zip(held, renewed) {
                // An entry that ended meanwhile moved on or was completed: its lease is gone by its own doing.
                guard running[previous.id]?.lease == previous else { continue }
                running[previous.id]?.lease = now
                if now == nil { lost.append(previous.id) }
            }
            return lost
        }
        for id in lost {
            logger.warning(
                "a retry's lease lapsed and another replica claimed it: this replica still finishes it, so the delivery may go out twice",
                metadata: ["entry": "\(id)"])
        }
    }

    private func start(_ claim: RetryClaim) {
        let entry = claim.entry
        running.withLock { tasks in
            // Claimed again while it runs (its lease lapsed and nobody else took it): this claim's lease is the one held now.
            guard tasks[entry.id] == nil else { return tasks[entry.id]?.lease = claim.lease }
            tasks[entry.id] = Running(
                task: Task { [self] in
                    await handle(entry)
                    let remaining = running.withLock { tasks -> Int in
                        tasks.removeValue(forKey: entry.id)
                        return tasks.count
                    }
                    processor.metrics.retriesInFlight.record(remaining)
                }, lease: claim.lease)
            processor.metrics.retriesInFlight.record(tasks.count)
        }
    }

    private func handle(_ entry: RetryEntry) async {
        let processed = await processor.processRetry(entry)
        guard case .acknowledged(let publications, let handedOff, _) = await outcomeHandOff.finish(processed) else { return }
        observer?.acknowledged(publications, timeline: nil, kafkaTimestamp: entry.fallbackCreatedAt)
        if !handedOff {
            _ = await processor.withStore { try await self.queue.complete(entry.id) }
        }
    }
}

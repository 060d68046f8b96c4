import Logging
import PushCore
import PushKafka

/// What became of one consumed message.
public enum ProcessedJob: Sendable {
    /// Not a valid job: it goes to the dead-letter topic.
    case deadLetter(JobRejection)
    /// One final outcome per target.
    case outcomes(Job, [Outcome])
    /// A stop interrupted the job: it stays uncommitted and Kafka delivers it again.
    case abandoned
}

/// Decode → validate → fan out to the targets → expire / deliver / retry → one outcome per target.
public struct JobProcessor: Sendable {
    public typealias Clock = @Sendable () -> Int64
    public typealias Sleep = @Sendable (Duration) async throws -> Void

    private let decoder: JobDecoder
    private let registry: ProviderRegistry
    private let retryPolicy: RetryPolicy
    private let clock: Clock
    private let sleep: Sleep
    private let logger: Logger

    public init(registry: ProviderRegistry, retryPolicy: RetryPolicy, jobLimits: JobLimits, logger: Logger,
                clock: @escaping Clock = currentTimeMilliseconds,
                sleep: @escaping Sleep = { try await Task.sleep(for: $0) }) {
        decoder = JobDecoder(limits: jobLimits)
        self.registry = registry
        self.retryPolicy = retryPolicy
        self.clock = clock
        self.sleep = sleep
        self.logger = logger
    }

    public func process(_ message: KafkaMessage) async -> ProcessedJob {
        let job: Job
        do {
            job = try decoder.decode(message.value, fallbackCreatedAt: message.timestamp ?? clock())
        } catch {
            logger.warning("invalid job sent to the dead-letter topic", metadata: [
                "partition": "\(message.topicPartition)", "offset": "\(message.offset)", "reason": "\(error)",
            ])
            return .deadLetter(error)
        }
        let outcomes = await withTaskGroup(of: (Int, Outcome?).self) { group in
            for (index, target) in job.targets.enumerated() {
                group.addTask { (index, await deliver(job, to: target)) }
            }
            var outcomes = [Outcome?](repeating: nil, count: job.targets.count)
            for await (index, outcome) in group { outcomes[index] = outcome }
            return outcomes
        }
        let finished = outcomes.compactMap { $0 }
        return finished.count == outcomes.count ? .outcomes(job, finished) : .abandoned
    }

    /// Attempts one target until it reaches a final outcome. Cancellation (a stop) abandons
    /// the attempt: the job is not finished and Kafka will deliver it again.
    func deliver(_ job: Job, to target: Target) async -> Outcome? {
        let deadline = job.deadline
        var attempt = 1
        while true {
            let now = clock()
            if deadline.isExpired(at: now, attempt: attempt) {
                return finish(Outcome(job: job, target: target, status: .expired,
                                      reason: "TTL of \(job.ttl) s passed before sending", attempts: attempt - 1, at: now))
            }
            guard let provider = registry.provider(for: target.provider) else {
                return finish(Outcome(job: job, target: target, status: .failed,
                                      reason: "provider \(target.provider.rawValue) is not enabled on this worker",
                                      attempts: attempt - 1, at: now))
            }
            let result = await provider.deliver(Delivery(job: job, target: target, attempt: attempt, now: now))
            guard case .retryable(let reason, let httpStatus, let retryAfter) = result else {
                return finish(Outcome(job: job, target: target, result: result, attempts: attempt, at: clock()))
            }
            let failedAt = clock()
            switch retryPolicy.decide(afterAttempt: attempt, now: failedAt, deadline: deadline, retryAfter: retryAfter) {
            case .retry(let dueAt):
                logger.info("delivery will be retried", metadata: metadata(job, target, [
                    "attempt": "\(attempt)", "reason": "\(reason)", "retryInMs": "\(dueAt - failedAt)",
                ]))
                do {
                    try await sleep(.milliseconds(dueAt - failedAt))
                } catch {
                    return nil
                }
                attempt += 1
            case .expired:
                return finish(Outcome(job: job, target: target, status: .expired,
                                      reason: "TTL ends before a retry could be sent (last error: \(reason))",
                                      attempts: attempt, at: failedAt, httpStatus: httpStatus))
            case .exhausted:
                return finish(Outcome(job: job, target: target, status: .failed,
                                      reason: "\(attempt) attempts exhausted (last error: \(reason))",
                                      attempts: attempt, at: failedAt, httpStatus: httpStatus))
            }
        }
    }

    private func finish(_ outcome: Outcome) -> Outcome {
        logger.info("delivery finished", metadata: [
            "jobId": "\(outcome.jobId)", "bindingId": "\(outcome.bindingId)", "provider": "\(outcome.provider.rawValue)",
            "app": "\(outcome.app ?? "-")", "status": "\(outcome.status.rawValue)", "attempts": "\(outcome.attempts)",
            "httpStatus": "\(outcome.httpStatus.map(String.init) ?? "-")", "reason": "\(outcome.reason ?? "-")",
        ])
        return outcome
    }

    private func metadata(_ job: Job, _ target: Target, _ extra: Logger.Metadata) -> Logger.Metadata {
        extra.merging(["jobId": "\(job.id)", "bindingId": "\(target.bindingId)", "provider": "\(target.provider.rawValue)",
                       "app": "\(target.app ?? "-")"]) { $1 }
    }
}

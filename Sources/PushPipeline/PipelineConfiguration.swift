import PushCore

public struct PipelineConfiguration: Sendable {
    public var jobsTopic: String
    public var outcomesTopic: String
    public var deadLetterTopic: String
    /// Jobs consumed and not yet finished; at the limit the consumer stops polling until one finishes.
    public var maximumInFlightJobs: Int
    public var retryPolicy: RetryPolicy
    public var jobLimits: JobLimits
    public var dedupeWindows: DedupeWindows
    /// How long a final outcome is remembered so a redelivered job is not sent again.
    public var idempotencyRetention: Duration
    /// How long a claimed retry belongs to its worker before others may take it.
    public var retryLease: Duration
    /// Retries processed at once by this replica's scheduler.
    public var maximumConcurrentRetries: Int
    /// Publish a `retrying` outcome each time a target is handed to the retry queue.
    public var publishRetryingOutcomes: Bool
    public var circuitBreaker: CircuitBreaker.Settings
    /// How long a revocation waits for the revoked partitions' jobs to finish before giving them up.
    public var revocationGrace: Duration
    /// How long a stop waits for in-flight jobs before abandoning them to redelivery.
    public var shutdownGrace: Duration

    public init(jobsTopic: String = "push.jobs", outcomesTopic: String = "push.outcomes",
                deadLetterTopic: String = "push.dlq", maximumInFlightJobs: Int = 1000,
                retryPolicy: RetryPolicy = .default, jobLimits: JobLimits = .default,
                dedupeWindows: DedupeWindows = .default, idempotencyRetention: Duration = .seconds(86_400),
                retryLease: Duration = .seconds(30), maximumConcurrentRetries: Int = 200,
                publishRetryingOutcomes: Bool = false, circuitBreaker: CircuitBreaker.Settings = .default,
                revocationGrace: Duration = .seconds(5), shutdownGrace: Duration = .seconds(20)) {
        self.jobsTopic = jobsTopic
        self.outcomesTopic = outcomesTopic
        self.deadLetterTopic = deadLetterTopic
        self.maximumInFlightJobs = maximumInFlightJobs
        self.retryPolicy = retryPolicy
        self.jobLimits = jobLimits
        self.dedupeWindows = dedupeWindows
        self.idempotencyRetention = idempotencyRetention
        self.retryLease = retryLease
        self.maximumConcurrentRetries = maximumConcurrentRetries
        self.publishRetryingOutcomes = publishRetryingOutcomes
        self.circuitBreaker = circuitBreaker
        self.revocationGrace = revocationGrace
        self.shutdownGrace = shutdownGrace
    }
}

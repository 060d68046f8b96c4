import PushCore

public struct PipelineConfiguration: Sendable {
    public var jobsTopic: String
    public var outcomesTopic: String
    public var deadLetterTopic: String
    /// Jobs consumed and not yet finished; at the limit the consumer pauses.
    public var maximumInFlightJobs: Int
    public var retryPolicy: RetryPolicy
    public var jobLimits: JobLimits
    /// How long a revocation waits for the revoked partitions' jobs to finish before giving them up.
    public var revocationGrace: Duration
    /// How long a stop waits for in-flight jobs before abandoning them to redelivery.
    public var shutdownGrace: Duration

    public init(jobsTopic: String = "push.jobs", outcomesTopic: String = "push.outcomes",
                deadLetterTopic: String = "push.dlq", maximumInFlightJobs: Int = 1000,
                retryPolicy: RetryPolicy = .default, jobLimits: JobLimits = .default,
                revocationGrace: Duration = .seconds(5), shutdownGrace: Duration = .seconds(20)) {
        self.jobsTopic = jobsTopic
        self.outcomesTopic = outcomesTopic
        self.deadLetterTopic = deadLetterTopic
        self.maximumInFlightJobs = maximumInFlightJobs
        self.retryPolicy = retryPolicy
        self.jobLimits = jobLimits
        self.revocationGrace = revocationGrace
        self.shutdownGrace = shutdownGrace
    }
}

import PushCore

public struct PipelineConfiguration: Sendable {
    /// The normal lane's topic.
    public var jobsTopic: String
    /// The urgent lane's topic (calls and cancels), consumed by its own consumer in the group
    /// `<group id>.urgent`; nil: no urgent lane.
    public var urgentTopic: String?
    public var outcomesTopic: String
    /// The consumer group (the normal lane's; the urgent lane's is named after it): the partition marks of the
    /// shared store are kept per group (`PartitionMarks`).
    public var consumerGroup = "push-worker"
    public var deadLetterTopic: String
    /// Jobs being worked on (consumed, not finished, not parked on an app limit) in both lanes
    /// together; a lane at its limit polls only to find other apps' jobs within its read-ahead bound.
    public var maximumInFlightJobs: Int
    /// The part of `maximumInFlightJobs` only the urgent lane may use. The urgent lane may also
    /// use whatever the normal lane leaves free; the normal lane never uses the reserved part.
    /// At most half of `maximumInFlightJobs` is reserved, whatever is set.
    public var urgentReservedInFlightJobs: Int
    /// Jobs consumed and not finished per lane, parked ones included, not those waiting behind their keys:
    /// how far a lane at capacity reads ahead (and the uncommitted window). nil: ten times `maximumInFlightJobs`.
    public var maximumReadAheadJobs: Int?
    /// Bytes of the jobs a lane holds, all of them (`PipelineStateMachine.Limits.cost(of:)`): the memory bound,
    /// from half of which the partitions whose keys hold the most are paused.
    public var maximumReadAheadBytes = Self.defaultReadAheadBytes
    /// Each lane's capacity is shared between the apps with jobs in it (`PipelineStateMachine`): one app's
    /// burst does not hold every place while another app's job waits in the read-ahead window. Off: ready jobs
    /// start in the order consumed, whatever their app, and a lane at capacity consumes nothing more (the
    /// baseline of `push-worker-dev bench --scenario burst --no-fair-share`).
    public var sharesLanesBetweenApps = true
    /// Requests in flight per (provider, app); more wait for a slot of their app, parked.
    public var maximumInFlightPerApp: Int
    /// Requests in flight per provider endpoint (`DeliveryScope.endpoint`), all apps together: a job's
    /// request beyond it waits as a value, in flight, before its task starts. nil: no such bound.
    public var maximumInFlightPerEndpoint: Int?
    /// Expire messages early (reason `shed`) when the normal lane lags.
    public var shedPolicy: ShedPolicy
    public var retryPolicy: RetryPolicy
    public var jobLimits: JobLimits
    public var dedupeWindows: DedupeWindows
    /// How long a claimed retry belongs to its worker before others may take it.
    public var retryLease: Duration
    /// Retries processed at once by this replica's scheduler.
    public var maximumConcurrentRetries: Int
    /// Publish a `retrying` outcome each time a target is handed to the retry queue.
    public var publishRetryingOutcomes: Bool
    public var circuitBreaker: CircuitBreaker.Settings
    /// The longest one send may take once it holds its app's slot: the longest request timeout of the
    /// enabled providers. A half-open circuit's probe that has not reported within it is given up, and the
    /// retry lease must outlast it.
    public var attemptTimeout: Duration
    /// How long a revocation waits for the revoked partitions' jobs to finish before giving them up.
    public var revocationGrace: Duration
    /// How long a stop waits for in-flight jobs before abandoning them to redelivery.
    public var shutdownGrace: Duration

    public init(
        jobsTopic: String = "push.jobs", urgentTopic: String? = "push.jobs.urgent", outcomesTopic: String = "push.outcomes",
        deadLetterTopic: String = "push.dlq", maximumInFlightJobs: Int = 1000,
        urgentReservedInFlightJobs: Int = 100, maximumReadAheadJobs: Int? = nil, maximumInFlightPerApp: Int = 500,
        maximumInFlightPerEndpoint: Int? = nil, shedPolicy: ShedPolicy = .off,
        retryPolicy: RetryPolicy = .default, jobLimits: JobLimits = .default,
        dedupeWindows: DedupeWindows = .default,
        retryLease: Duration = .seconds(30), maximumConcurrentRetries: Int = 200,
        publishRetryingOutcomes: Bool = false, circuitBreaker: CircuitBreaker.Settings = .default, attemptTimeout: Duration = .seconds(10),
        revocationGrace: Duration = .seconds(5), shutdownGrace: Duration = .seconds(20)
    ) {
        self.jobsTopic = jobsTopic
        self.urgentTopic = urgentTopic
        self.urgentReservedInFlightJobs = urgentReservedInFlightJobs
        self.maximumReadAheadJobs = maximumReadAheadJobs
        self.maximumInFlightPerApp = maximumInFlightPerApp
        self.maximumInFlightPerEndpoint = maximumInFlightPerEndpoint
        self.shedPolicy = shedPolicy
        self.outcomesTopic = outcomesTopic
        self.deadLetterTopic = deadLetterTopic
        self.maximumInFlightJobs = maximumInFlightJobs
        self.retryPolicy = retryPolicy
        self.jobLimits = jobLimits
        self.dedupeWindows = dedupeWindows
        self.retryLease = retryLease
        self.maximumConcurrentRetries = maximumConcurrentRetries
        self.publishRetryingOutcomes = publishRetryingOutcomes
        self.circuitBreaker = circuitBreaker
        self.attemptTimeout = attemptTimeout
        self.revocationGrace = revocationGrace
        self.shutdownGrace = shutdownGrace
    }

    /// The urgent lane's reserve as applied: never more than half of `maximumInFlightJobs`.
    public var effectiveUrgentReservedInFlightJobs: Int { max(0, min(urgentReservedInFlightJobs, maximumInFlightJobs / 2)) }

    /// The longest a send waits for its app's (and endpoint's) slot before it is handed back to be retried
    /// (the TTL may end it sooner): a few of the app's requests, so a job waits behind a slow app, never for good.
    public var longestSlotWait: Duration { attemptTimeout * 3 }

    /// How long a half-open circuit's probe may take to report before the next send probes instead: its
    /// longest wait for a slot, its request, and a margin.
    public var probeLease: Duration { longestSlotWait + attemptTimeout + .seconds(5) }

    /// The read-ahead bound per lane.
    public var readAheadJobs: Int { max(maximumReadAheadJobs ?? 10 * maximumInFlightJobs, maximumInFlightJobs) }

    /// 32 MiB per lane.
    public static let defaultReadAheadBytes = 32 << 20

    /// The bytes bound per lane.
    public var readAheadBytes: Int { max(maximumReadAheadBytes, 1 << 20) }
}

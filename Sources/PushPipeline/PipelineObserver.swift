/// Watches outcomes reach Kafka, for measurements (`push-worker-dev bench`); called on the
/// job's task, so it must be cheap and must not block.
public protocol PipelineObserver: Sendable {
    /// Kafka acknowledged these outcomes and dead letters, of a consumed job (`timeline` set)
    /// or of a claimed retry. `kafkaTimestamp` is the job message's timestamp when known.
    func acknowledged(_ publications: [Publication], timeline: JobTimeline?, kafkaTimestamp: Int64?)
}

/// When a consumed job reached the steps whose durations a latency is made of.
public struct JobTimeline: Sendable {
    /// Its task started: its turn came (per key, within capacity) and, for one target, its app's slot was free.
    public var started: ContinuousClock.Instant
    /// Its targets were done (the store's checks, the provider's answers, the outcomes recorded); publishing began.
    public var processed: ContinuousClock.Instant

    public init(started: ContinuousClock.Instant, processed: ContinuousClock.Instant) {
        self.started = started
        self.processed = processed
    }
}

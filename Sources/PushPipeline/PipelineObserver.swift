/// Watches outcomes reach Kafka, for measurements (`push-worker bench`); called on the
/// job's task, so it must be cheap and must not block.
public protocol PipelineObserver: Sendable {
    /// Kafka acknowledged these outcomes and dead letters, of a consumed job (`consumedAt` set)
    /// or of a claimed retry. `kafkaTimestamp` is the job message's timestamp when known.
    func acknowledged(_ publications: [Publication], consumedAt: ContinuousClock.Instant?, kafkaTimestamp: Int64?)
}

import Logging
import PushCore
import PushKafka
import Tracing

/// Decode → validate → idempotency and dedupe → per target: TTL, circuit, deliver,
/// retry → one final outcome per target (or a hand-off to the retry queue).
/// A class, not a struct: every closure and task of a job captures it, and a copy of a dozen stored references
/// would retain and release each of them.
public final class JobProcessor: Sendable {
    public typealias Sleep = @Sendable (Duration) async throws -> Void

    let decoder: JobDecoder
    /// Read once per admission and per attempt: live configuration may replace them between two.
    let providers: LiveProviders
    let configuration: PipelineConfiguration
    let store: any DeliveryStore
    /// nil: retries wait in the job's task and its offset stays uncommitted (single replica, no Redis); the waiting job
    /// holds neither in-flight capacity nor its Kafka key, as one handed to the retry queue does not.
    let retryQueue: (any RetryQueue)?
    let breakers: CircuitBreakers
    let appLimits: AppConcurrencyLimits
    /// Which consumed offsets are first deliveries, whose records need no read.
    let marks: PartitionMarks
    let health: StoreHealth
    let metrics: PipelineMetrics
    let clock: WallClock
    let sleep: Sleep
    let logger: Logger
    /// The logger's handler when it writes a delivery's line itself (the worker's JSON lines): one per delivery.
    private let finishedDeliveryLogging: (any FinishedDeliveryLogging)?
    /// The jobs' spans; nil while trace export is off.
    let tracing: JobTracing?

    public convenience init(
        registry: ProviderRegistry, configuration: PipelineConfiguration, store: any DeliveryStore,
        retryQueue: (any RetryQueue)?, health: StoreHealth = StoreHealth(), metrics: PipelineMetrics = PipelineMetrics(),
        logger: Logger, tracing: JobTracing? = nil,
        clock: @escaping WallClock = currentTimeMilliseconds,
        sleep: @escaping Sleep = { try await Task.sleep(for: $0) }
    ) {
        self.init(
            providers: LiveProviders(registry), configuration: configuration, store: store, retryQueue: retryQueue, health: health,
            metrics: metrics, logger: logger, tracing: tracing, clock: clock, sleep: sleep)
    }

    /// - Parameter providers: the providers, which live configuration may replace; the target formats of the registry
    ///   given first (every linked plugin's) stay.
    /// - Parameter tracing: the jobs' spans, when trace export is on.
    public init(
        providers: LiveProviders, configuration: PipelineConfiguration, store: any DeliveryStore,
        retryQueue: (any RetryQueue)?, health: StoreHealth = StoreHealth(), metrics: PipelineMetrics = PipelineMetrics(),
        logger: Logger, tracing: JobTracing? = nil,
        clock: @escaping WallClock = currentTimeMilliseconds,
        sleep: @escaping Sleep = { try await Task.sleep(for: $0) }
    ) {
        decoder = JobDecoder(limits: configuration.jobLimits, formats: providers.current.formats)
        self.providers = providers
        self.configuration = configuration
        self.store = store
        self.retryQueue = retryQueue
        var circuitSettings = configuration.circuitBreaker
        circuitSettings.probeLeaseMilliseconds = max(1, configuration.probeLease.milliseconds)
        breakers = CircuitBreakers(settings: circuitSettings, metrics: metrics, logger: logger)
        appLimits = AppConcurrencyLimits(
            limit: configuration.maximumInFlightPerApp, endpointLimit: configuration.maximumInFlightPerEndpoint,
            metrics: metrics)
        self.health = health
        self.metrics = metrics
        self.clock = clock
        self.sleep = sleep
        self.logger = logger
        finishedDeliveryLogging = logger.handler as? any FinishedDeliveryLogging
        self.tracing = tracing
        marks = PartitionMarks(
            group: configuration.consumerGroup, store: store,
            answered: { [health, metrics, logger] in
                Self.storeAnswered(health: health, metrics: metrics, logger: logger)
            },
            failed: { [health, metrics, logger] in Self.storeFailed($0, health: health, metrics: metrics, logger: logger) })
    }

    public var circuitBreakers: CircuitBreakers { breakers }

    /// Where the job came from: a Kafka message or a claimed retry.
    struct Source: Sendable {
        enum Location: Sendable {
            case message(TopicPartition, offset: Int64)
            case retryEntry(id: String)
        }

        let value: [UInt8]
        let key: [UInt8]?
        let fallbackCreatedAt: Int64
        let location: Location
        /// The lane that consumed it; nil for a claimed retry.
        var lane: Lane? = nil
        /// Tells the pipeline while the job waits for an app slot.
        var parking: JobParking? = nil
        /// The slots reserved for the first send before the job's task started, until a send takes them or the job
        /// gives them back: the run passes its source on `inout`, so one permit is spent once.
        var slot: SlotPermit? = nil
        /// The reservation for the first send waited its longest already: that send takes a slot only if one is free.
        var slotWaitSpent = false

        /// For logs and dead letters: `topic/partition@offset`, or `retry-queue/<entry id>`.
        var description: String {
            switch location {
            case .message(let topicPartition, let offset): "\(topicPartition.topic)/\(topicPartition.partition)@\(offset)"
            case .retryEntry(let id): "retry-queue/\(id)"
            }
        }
    }

    /// A consumed message, decoded before its task starts, and the scope whose slot its first
    /// send needs: set for a job with one target of an enabled provider (what the pipeline
    /// reserves before it starts the job's task); nil for a job that is invalid, expired, has
    /// several targets (each waits for its own slot inside the task) or sends nothing.
    /// A class: the closures that start it (a slot's grant, its task) each hold it.
    final class AdmittedJob: PipelineJob {
        let message: KafkaMessage
        /// The app of its first target, whose share of the lane it takes; nil when it does not decode.
        let tenant: Tenant?
        let lane: Lane
        let fallbackCreatedAt: Int64
        let decoded: Result<Job, JobRejection>
        let scope: DeliveryScope?
        /// The lane whose turn the job takes at its app slot (a call consumed on the normal lane goes urgent).
        let deliveryLane: Lane
        /// Its offset was consumed before since its partition was assigned (`PartitionMarks.consumed`).
        let consumedBefore: Bool

        init(
            message: KafkaMessage, lane: Lane, fallbackCreatedAt: Int64, decoded: Result<Job, JobRejection>, scope: DeliveryScope?,
            deliveryLane: Lane, consumedBefore: Bool
        ) {
            self.consumedBefore = consumedBefore
            self.message = message
            self.lane = lane
            self.fallbackCreatedAt = fallbackCreatedAt
            self.decoded = decoded
            self.scope = scope
            self.deliveryLane = deliveryLane
            tenant = (try? decoded.get()).flatMap(Tenant.init(of:))
        }
    }

    func admit(_ message: KafkaMessage, lane: Lane) -> AdmittedJob {
        let fallbackCreatedAt = message.timestamp ?? clock()
        let decoded = Result { () throws(JobRejection) -> Job in try decoder.decode(message.value, fallbackCreatedAt: fallbackCreatedAt) }
        var scope: DeliveryScope?
        var deliveryLane = lane
        if case .success(let job) = decoded, job.targets.count == 1, job.targets[0].isDeliverable, !job.deadline.isExpired(at: clock()),
            let provider = providers.provider(for: job.targets[0].provider)
        {
            scope = provider.scope(of: job.targets[0])
            deliveryLane = Lane.delivery(consumedOn: lane, kind: job.kind)
        }
        return AdmittedJob(
            message: message, lane: lane, fallbackCreatedAt: fallbackCreatedAt, decoded: decoded, scope: scope,
            deliveryLane: deliveryLane, consumedBefore: marks.consumed(message.topicPartition, offset: message.offset))
    }

    /// Processes a job consumed on `lane`, its final outcomes recorded.
    public func process(_ message: KafkaMessage, lane: Lane = .normal) async -> ProcessedJob {
        await recorded(process(admit(message, lane: lane), slot: nil, parking: nil))
    }

    /// Processes an admitted job up to its final outcomes, which are left for the caller to record
    /// (`recorded`, or `record(_:givingUp:then:)` without a task waiting); nil when a stop interrupted it.
    /// `slot`, when given, is the slot of `admitted.scope` held for its first send.
    /// (Like `attempt`, it leaves the work between its `await`s to functions of their own, to keep its async frame small.)
    /// `slotWaitSpent`: the job waited for that slot as a value its longest already (its first send takes one only if free).
    func process(_ admitted: AdmittedJob, slot: SlotPermit?, parking: JobParking?, slotWaitSpent: Bool = false) async -> ProcessedTargets? {
        let message = admitted.message
        var source = Source(admitted, parking: parking, slot: slot, slotWaitSpent: slotWaitSpent)
        defer { appLimits.giveBack(&source.slot) }
        let job: Job
        switch admitted.decoded {
        case .success(let decoded): job = decoded
        case .failure(let rejection): return ProcessedTargets(results: [.final([deadLettered(rejection, source: source)])])
        }
        let (window, shed) = dedupeWindow(job, lane: admitted.lane, kafkaTimestamp: message.timestamp)
        // Asked without an `await` first: the mark is usually ahead of the offsets consumed.
        let coveredNow = marks.coveredNow(message.topicPartition, offset: message.offset, consumedBefore: admitted.consumedBefore)
        let cover: PartitionMarks.Cover
        if let coveredNow {
            cover = coveredNow
        } else {
            cover = await marks.cover(message.topicPartition, offset: message.offset, consumedBefore: admitted.consumedBefore)
        }
        guard cover != .givenUp else { return nil }
        return await processChecked(job, window: window, shed: shed, firstDelivery: cover == .firstDelivery, source: &source)
    }

    /// A consumed job from its checks in the store on, with its dedupe window, whether it is shed, and whether its
    /// offset is a first delivery (its partition's mark).
    @inline(never)
    func processChecked(_ job: Job, window: Int64, shed: Bool, firstDelivery: Bool, source: inout Source) async -> ProcessedTargets? {
        guard let prior = await prepareInStore(job, dedupeWindow: window, firstDelivery: firstDelivery, parking: source.parking) else {
            return nil
        }
        // One target (the common case) runs on the job's own task: a child task per target
        // costs a task allocation and a scheduling hop, and keeps its own stack of async frames.
        if job.targets.count == 1 {
            return ProcessedTargets(unlessAbandoned: [
                await handle(job, target: job.targets[0], prior: prior[0], window: window, shed: shed, source: &source)
            ])
        }
        return await handleEach(job, prior: prior, window: window, shed: shed, source: source)
    }

    /// What the store knows of each target (and, for a cancel, the cancel recorded); nil when a stop interrupts it.
    /// (A redelivery's retry entry counts only once a replica has it: the job waits parked while none acknowledges.)
    @inline(never)
    private func prepareInStore(_ job: Job, dedupeWindow window: Int64, firstDelivery: Bool, parking: JobParking?) async -> [PriorState]? {
        let span = tracing?.storeSpan("prepare")
        defer { span?.end() }
        guard
            let prior = await withStore(
                parking: parking, { try await store.prepare(job, dedupeWindow: window, firstDelivery: firstDelivery) })
        else {
            return nil
        }
        if job.kind == .cancel, CallCancellation.key(of: job) != nil {
            guard await withStore({ try await store.recordCancellation(job) }) != nil else {
                return nil
            }
        }
        return prior
    }

    @inline(never)
    private func deadLettered(_ rejection: JobRejection, source: Source) -> Publication {
        metrics.invalid(rejection.code)
        logger.warning(
            "invalid job sent to the dead-letter topic", metadata: ["source": "\(source.description)", "reason": "\(rejection)"])
        return .deadLetter(rejection, value: source.value, key: source.key, source: source.description)
    }

    /// The job's dedupe window, and whether its lane's overload sheds it (it is then finished unsent, with no window).
    @inline(never)
    func dedupeWindow(_ job: Job, lane: Lane, kafkaTimestamp: Int64?) -> (window: Int64, shed: Bool) {
        let consumedAt = clock()
        let lag = kafkaTimestamp.map { max(consumedAt.subtracting(saturating: $0), 0) } ?? 0
        let shed = configuration.shedPolicy.sheds(kind: job.kind, deadline: job.deadline, lane: lane, lagMilliseconds: lag, now: consumedAt)
        if shed {
            metrics.shed()
            logger.info(
                "lane overloaded: message shed instead of sent late",
                metadata: [
                    "jobId": "\(job.id)", "lagMs": "\(lag)", "remainingTtlMs": "\(job.deadline.remainingMilliseconds(at: consumedAt))",
                ])
        }
        let window = job.deadline.isExpired(at: clock()) || shed ? 0 : configuration.dedupeWindows.window(for: job.kind)
        return (window, shed)
    }

    /// A job with several targets: each on a child task of its own, which records its final outcome
    /// as soon as it has it (a slow target does not hold back the record of a finished one).
    @inline(never)
    private func handleEach(_ job: Job, prior: [PriorState], window: Int64, shed: Bool, source: Source) async -> ProcessedTargets? {
        let results = await withTaskGroup(of: (Int, TargetResult).self) { group in
            for (index, target) in job.targets.enumerated() {
                group.addTask { [self] in
                    // A job with several targets reserves no slot before its task: each target's send waits for its own.
                    var source = source
                    return (
                        index, await recorded(handle(job, target: target, prior: prior[index], window: window, shed: shed, source: &source))
                    )
                }
            }
            var results = [TargetResult](repeating: .abandoned, count: job.targets.count)
            for await (index, result) in group { results[index] = result }
            return results
        }
        return ProcessedTargets(unlessAbandoned: results)
    }

    /// One target of a consumed job, given what the store knew about it.
    @inline(never)
    private func handle(
        _ job: Job, target: Target, prior: PriorState, window: Int64, shed: Bool, source: inout Source
    ) async -> TargetResult {
        if case .fresh = prior, !shed, target.isDeliverable {} else { appLimits.giveBack(&source.slot) }
        switch firstStep(job, target: target, prior: prior, window: window, shed: shed) {
        case .finish(let outcome, let deadLetter): return .recording(outcome, deadLetter: deadLetter)
        case .done(let result): return result
        case .again(let attempt): return await self.attempt(job, target, startingAt: attempt, source: &source, entryId: nil)
        }
    }

    /// What a consumed job's target needs first: an outcome without a send, nothing, or its first attempt.
    @inline(never)
    func firstStep(_ job: Job, target: Target, prior: PriorState, window: Int64, shed: Bool) -> AttemptEnd {
        if target.isUnbound, !prior.isAlreadyFinished {
            return .finish(Outcome(unboundJob: job, target: target, at: clock()))
        }
        if target.refusal != nil, !prior.isAlreadyFinished {
            return .finish(Outcome(refusedJob: job, target: target, at: clock()))
        }
        switch prior {
        case .alreadyFinished(let outcome):
            logger.info(
                "redelivered job: final outcome already recorded, not sent again",
                metadata: metadata(job, target, ["status": "\(outcome.status.rawValue)"]))
            return .done(.final([.outcome(outcome)]))
        case .inRetryQueue:
            logger.info("redelivered job: this target waits in the retry queue, which owns it", metadata: metadata(job, target))
            return .done(.handedOff([]))
        case .duplicate(let earlierJob):
            return .finish(
                Outcome(
                    job: job, target: target, status: .deduplicated,
                    reason:
                        "job \(earlierJob) sent the same \(DedupeWindows.identity(of: job)) to this binding less than \(window) ms earlier",
                    attempts: 0, at: clock()))
        case .fresh where shed:
            return .finish(Outcome(shedJob: job, target: target, at: clock()))
        case .fresh:
            return .again(attempt: 1)
        }
    }

    /// Runs one claimed retry: the same rules as a first attempt, from the next attempt number; its final outcome is
    /// left for `OutcomeHandOff` to record, like a consumed job's. nil when a stop interrupted it.
    func processRetry(_ entry: RetryEntry) async -> ProcessedTargets? {
        var source = Source(
            value: entry.jobBytes, key: entry.kafkaKey, fallbackCreatedAt: entry.fallbackCreatedAt,
            location: .retryEntry(id: entry.id))
        guard let job = try? decoder.decode(entry.jobBytes, fallbackCreatedAt: entry.fallbackCreatedAt),
            let target = job.targets.first(where: { $0.bindingId == entry.bindingId && $0.isDeliverable })
        else {
            let rejection = JobRejection(
                .invalidField, "retry entry \(entry.id) no longer decodes to a job with binding \(entry.bindingId)")
            return ProcessedTargets(results: [
                .final([.deadLetter(rejection, value: entry.jobBytes, key: entry.kafkaKey, source: source.description)])
            ])
        }
        guard let earlier = await withStore({ try await store.recordedOutcome(of: job, target: target) }) else {
            return nil
        }
        if let outcome = earlier {
            return ProcessedTargets(results: [.final([.outcome(outcome)])])
        }
        return ProcessedTargets(unlessAbandoned: [
            await attempt(job, target, startingAt: entry.attempts + 1, source: &source, entryId: entry.id)
        ])
    }

    enum TargetResult: Sendable {
        case final([Publication])
        /// A final outcome to record before it is published, with the dead letter that goes with it.
        case recording(Outcome, deadLetter: Publication?)
        case handedOff([Publication])
        case abandoned
    }

    /// A processed job: each target's result, in order, with the final outcomes not recorded yet.
    struct ProcessedTargets: Sendable {
        let results: [TargetResult]

        /// nil when a target was abandoned (a stop): the whole job is then processed again later.
        init?(unlessAbandoned results: [TargetResult]) {
            guard !results.contains(where: { if case .abandoned = $0 { true } else { false } }) else { return nil }
            self.results = results
        }

        init(results: [TargetResult]) { self.results = results }

        var outcomesToRecord: [Outcome] {
            results.compactMap { if case .recording(let outcome, _) = $0 { outcome } else { nil } }
        }
    }

    /// The job once its outcomes are recorded: logs each and lists what to publish.
    func published(_ processed: ProcessedTargets) -> ProcessedJob {
        var publications: [Publication] = []
        var handedOff = false
        for result in processed.results {
            switch result {
            case .final(let items): publications += items
            case .recording(let outcome, let deadLetter):
                logFinished(outcome)
                publications.append(.outcome(outcome))
                if let deadLetter { publications.append(deadLetter) }
            case .handedOff(let items):
                publications += items
                handedOff = true
            case .abandoned: return .abandoned
            }
        }
        return .publish(publications, handedOff: handedOff)
    }

    /// `record(_:givingUp:then:)` for a task: records the job's final outcomes (until the store answers, pausing intake
    /// while it is down, or the task is cancelled), then what to publish.
    func recorded(_ processed: ProcessedTargets?) async -> ProcessedJob {
        guard let processed else { return .abandoned }
        return await withGivingUpOnCancel { givingUp, done in record(processed, givingUp: givingUp) { recorded, _ in done(recorded) } }
    }

    /// One target's final outcome recorded (`.final`), or its result as it was.
    private func recorded(_ result: TargetResult) async -> TargetResult {
        guard case .recording = result else { return result }
        guard case .publish(let publications, _) = await recorded(ProcessedTargets(results: [result])) else { return .abandoned }
        return .final(publications)
    }

    /// The one way outcomes are recorded, with no task waiting: `then` runs once the store answered (on the store's thread), with the outcomes
    /// recorded and their JSON (what the outcomes topic gets), or with `.abandoned` when the store failed and `givingUp` says to stop.
    /// `trace`: the job's span context, under which its finished deliveries are logged (their lines then carry its ids).
    func record(
        _ processed: ProcessedTargets, trace: ServiceContext? = nil, givingUp: @escaping @Sendable () -> Bool,
        then done: @escaping @Sendable (ProcessedJob, [EncodedOutcome]) -> Void
    ) {
        PendingOutcomes(processor: self, processed: processed, trace: trace, givingUp: givingUp, next: .report(done)).start()
    }

    private func logFinished(_ outcome: Outcome) {
        metrics.finished(outcome)
        guard logger.logLevel <= .info else { return }
        // A traced job's line goes through the logger, whose metadata provider adds the trace's ids.
        if let finishedDeliveryLogging, tracing == nil {
            finishedDeliveryLogging.logFinishedDelivery(outcome)
        } else {
            logger.info(FinishedDeliveryLog.message, metadata: FinishedDeliveryLog.metadata(of: outcome))
        }
    }

    /// Runs a store operation until it succeeds, pausing intake while the store is down; nil when a stop or the
    /// partition's revocation cancels the wait (`StoreRetries`): the job is then abandoned, uncommitted. A `ReplicationShortfall` (the store answers, its
    /// replicas lag) does not pause intake: this job alone waits, parked (no in-flight capacity) when `parking` is given.
    @inline(never)
    func withStore<T: Sendable>(parking: JobParking? = nil, _ operation: @Sendable () async throws -> T) async -> T? {
        var retries = StoreRetries()
        var parked = false
        defer { if parked { parking?.unpark() } }
        while true {
            do {
                let value = try await operation()
                storeAnswered()
                return value
            } catch let shortfall as ReplicationShortfall {
                replicationFellShort(shortfall)
                if !parked, let parking {
                    parking.park()
                    parked = true
                }
            } catch {
                storeFailed(error)
            }
            guard await retries.pause() else { return nil }
        }
    }

    func storeAnswered() { Self.storeAnswered(health: health, metrics: metrics, logger: logger) }

    func storeFailed(_ error: any Error) {
        health.count(.unavailable)
        Self.storeFailed(error, health: health, metrics: metrics, logger: logger)
    }

    /// The store answered but its replicas did not acknowledge in time: counted, logged at most once an interval,
    /// and the store stays healthy (pausing every partition for one lagging replica would stall the whole fleet).
    func replicationFellShort(_ shortfall: ReplicationShortfall) {
        storeAnswered()
        health.count(.replicationShortfall)
        guard let count = health.shortfalls.note() else { return }
        logger.warning(
            "shared store's replicas do not acknowledge writes in time: the jobs concerned wait uncommitted, intake goes on",
            metadata: ["shortfall": "\(shortfall)", "shortfalls": "\(count)"])
    }

    @inline(never)
    private static func storeAnswered(health: StoreHealth, metrics: PipelineMetrics, logger: Logger) {
        if health.set(true) {
            metrics.storeAvailable.record(1)
            logger.notice("shared store reachable again: resuming")
        }
    }

    @inline(never)
    private static func storeFailed(_ error: any Error, health: StoreHealth, metrics: PipelineMetrics, logger: Logger) {
        if health.set(false) {
            metrics.storeAvailable.record(0)
            logger.error("shared store unavailable: pausing intake", metadata: ["error": "\(error)"])
        }
    }

    func metadata(_ job: Job, _ target: Target, _ extra: Logger.Metadata = [:]) -> Logger.Metadata {
        extra.merging([
            "jobId": "\(job.id)", "bindingId": "\(target.bindingId)", "provider": "\(target.provider.rawValue)",
            "app": "\(target.app ?? "-")",
        ]) { $1 }
    }
}

extension JobProcessor.Source {
    /// A consumed job's source.
    init(_ admitted: JobProcessor.AdmittedJob, parking: JobParking?, slot: SlotPermit?, slotWaitSpent: Bool) {
        let message = admitted.message
        self.init(
            value: message.value, key: message.key, fallbackCreatedAt: admitted.fallbackCreatedAt,
            location: .message(message.topicPartition, offset: message.offset), lane: admitted.lane, parking: parking, slot: slot,
            slotWaitSpent: slotWaitSpent)
    }
}

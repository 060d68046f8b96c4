import PushCore

/// The hot path: a job runs with no task while nothing makes it wait. The store's answer and the provider's arrive
/// as callbacks on the threads that carry them (the Redis client's, the HTTP/2 client's), and each step between is a
/// plain function here. The first step that would wait (a slot not held, a retryable answer, a provider whose
/// delivery awaits, a store that failed) hands the rest of the job to a task, from exactly that point
/// (`resume(_:from:source:)`): a job is never started twice, and every rule is the one the task's path follows.
extension JobProcessor {
    /// What a job run with no task knows from its start.
    struct TasklessRun: Sendable {
        let job: Job
        let window: Int64
        let shed: Bool
        let firstDelivery: Bool

        var target: Target { job.targets[0] }
    }

    /// Where a run with no task goes after a step.
    enum TasklessStep: Sendable {
        /// The target's result: the job is processed.
        case finished(TargetResult)
        /// The send goes now, on the slots the job holds.
        case send(SendSlot, Delivery)
        /// The rest waits for something: it runs on a task from this point.
        case resume(ResumePoint)
    }

    /// Where a task takes a run with no task over.
    enum ResumePoint: Sendable {
        /// The checks in the store (they failed, or were not asked yet).
        case checks
        /// A send its provider and circuit admitted; `holding` its slots, else it waits for them.
        case admitted(SendSlot, holding: Bool)
        /// A send that gave this (a retryable answer, or a provider whose delivery awaits).
        case sent(SendResult)
    }

    /// A job runs with no task when no trace is exported, it has one target whose slots were reserved before it
    /// started (`slot`), its partition's mark answers now, and it is neither a call nor a cancel with a cancel key
    /// (those ask the store about the cancel). nil: it runs on a task, as `process` does.
    func tasklessRun(of admitted: AdmittedJob, slot: SlotPermit?) -> TasklessRun? {
        guard tracing == nil, slot != nil, case .success(let job) = admitted.decoded, job.targets.count == 1 else { return nil }
        if job.kind == .call || job.kind == .cancel, CallCancellation.key(of: job) != nil { return nil }
        let message = admitted.message
        guard let cover = marks.coveredNow(message.topicPartition, offset: message.offset, consumedBefore: admitted.consumedBefore),
            cover != .givenUp
        else { return nil }
        let (window, shed) = dedupeWindow(job, lane: admitted.lane, kafkaTimestamp: message.timestamp)
        return TasklessRun(job: job, window: window, shed: shed, firstDelivery: cover == .firstDelivery)
    }

    /// The store's checks answered: the target's first step, and its first send as far as it goes without waiting.
    func checked(_ answer: Result<[PriorState], any Error>, _ run: TasklessRun, source: inout Source) -> TasklessStep {
        // A failed check is asked again by the task, which counts the failure and pauses intake as `withStore` does.
        guard case .success(let prior) = answer else { return .resume(.checks) }
        storeAnswered()
        let job = run.job
        let target = run.target
        if case .fresh = prior[0], !run.shed, target.isDeliverable {} else { appLimits.giveBack(&source.slot) }
        switch firstStep(job, target: target, prior: prior[0], window: run.window, shed: run.shed) {
        case .finish(let outcome, let deadLetter): return .finished(.recording(outcome, deadLetter: deadLetter))
        case .done(let result): return .finished(result)
        case .again: break
        }
        let now = clock()
        if let expired = Self.expiredBeforeSending(job, target, attempt: 1, at: now) { return step(after: expired) }
        var holding = false
        var ended: SendResult?
        guard let slot = admitSend(job, target, source: &source, attempt: 1, at: now, holding: &holding, ended: &ended) else {
            return step(after: ended!, run)
        }
        guard holding else { return .resume(.admitted(slot, holding: false)) }
        let sendAt = clock()
        if let expired = expiredAtSend(slot, job, target, attempt: 1, at: sendAt) { return step(after: expired, run) }
        return .send(slot, Delivery(job: job, target: target, attempt: 1, now: sendAt, lane: slot.lane))
    }

    /// The provider's answer to the send (or its result without a request): the slot goes back, the request is counted.
    func answered(
        _ result: DeliveryResult, slot: SendSlot, _ run: TasklessRun, startedAt: ContinuousClock.Instant, source: inout Source
    ) -> TasklessStep {
        step(after: sent(result, slot: slot, run.target, startedAt: startedAt, source: &source), run)
    }

    /// Runs the rest of a job on a task from where the run with no task stopped; nil when a stop interrupted it.
    func resume(_ run: TasklessRun, from point: ResumePoint, source: Source) async -> ProcessedTargets? {
        var source = source
        defer { appLimits.giveBack(&source.slot) }
        let firstSend: SendResult
        switch point {
        case .checks:
            return await processChecked(run.job, window: run.window, shed: run.shed, firstDelivery: run.firstDelivery, source: &source)
        case .admitted(let slot, let holding):
            firstSend = await sendAdmitted(slot, holding: holding, run.job, run.target, attempt: 1, source: &source, at: clock())
        case .sent(let sent):
            firstSend = sent
        }
        return ProcessedTargets(unlessAbandoned: [
            await attempt(run.job, run.target, startingAt: 1, source: &source, entryId: nil, firstSend: firstSend)
        ])
    }

    private func step(after sent: SendResult, _ run: TasklessRun) -> TasklessStep {
        switch settle(sent, run.job, run.target, attempt: 1) {
        case .ended(let end): step(after: end)
        case .retryable: .resume(.sent(sent))
        }
    }

    private func step(after end: AttemptEnd) -> TasklessStep {
        switch end {
        case .finish(let outcome, let deadLetter): .finished(.recording(outcome, deadLetter: deadLetter))
        case .done(let result): .finished(result)
        // Another attempt: the attempt loop takes it from here.
        case .again: .resume(.sent(.ended(end)))
        }
    }
}

import PushCore
import Tracing

/// The attempts of one target, split into a short loop and one function per step. An async
/// function keeps everything it holds across an `await` in a frame allocated for the whole call,
/// one slot per call site and temporary, and a job in flight keeps the frames of its whole chain
/// of calls: a step that builds outcomes, log metadata or retry entries does so in its own frame,
/// gone before the next step, instead of in the loop's.
extension JobProcessor {
    /// How a pass through the attempt loop ends. The large cases are `indirect`, so the frames that hold one stay small;
    /// `again`, which every first attempt takes, is not: each value of an indirect case is an allocation.
    enum AttemptEnd: Sendable {
        /// Record and publish this outcome (and dead letter), then the target is done.
        indirect case finish(Outcome, deadLetter: Publication? = nil)
        indirect case done(TargetResult)
        /// Send again, as this attempt.
        case again(attempt: Int)
    }

    /// What `send` did. Only the rare case is `indirect` (each value of one is an allocation).
    enum SendResult: Sendable {
        indirect case ended(AttemptEnd)
        /// The provider's answer, or the circuit's when it held the send back.
        case answered(DeliveryResult, heldBack: Bool)
    }

    /// Attempts one target from attempt `first` until it is final, handed to the retry
    /// queue, or abandoned by a stop. `firstSend`: what the first attempt's send gave already (a run with no task
    /// went that far, `JobProcessor+Taskless.swift`).
    @inline(never)
    func attempt(
        _ job: Job, _ target: Target, startingAt first: Int, source: inout Source, entryId: String?, firstSend: SendResult? = nil
    ) async -> TargetResult {
        var attempt = first
        var given = firstSend
        while true {
            let now = clock()
            let end: AttemptEnd
            let early = given == nil ? await checkBeforeSending(job, target, attempt: attempt, at: now) : nil
            if let early {
                end = early
            } else {
                let sent: SendResult
                if let taken = given.take() {
                    sent = taken
                } else {
                    sent = await send(job, target, attempt: attempt, source: &source, at: now)
                }
                switch settle(sent, job, target, attempt: attempt) {
                case .ended(let ended):
                    end = ended
                case .retryable(let reason, let httpStatus, let retryAfter, let heldBack):
                    end = await afterRetryable(
                        reason: reason, httpStatus: httpStatus, retryAfter: retryAfter, heldBack: heldBack,
                        job, target, attempt: attempt, source: source, entryId: entryId)
                }
            }
            switch end {
            case .finish(let outcome, let deadLetter): return .recording(outcome, deadLetter: deadLetter)
            case .done(let result): return result
            case .again(let next): attempt = next
            }
        }
    }

    /// What a send leaves of its attempt: its end, or a retryable answer (`afterRetryable` decides, which may wait).
    enum Settled {
        case ended(AttemptEnd)
        case retryable(reason: String, httpStatus: Int?, retryAfter: Duration?, heldBack: Bool)
    }

    func settle(_ sent: SendResult, _ job: Job, _ target: Target, attempt: Int) -> Settled {
        switch sent {
        case .ended(let ended): .ended(ended)
        case .answered(.retryable(let reason, let httpStatus, let retryAfter), let heldBack):
            .retryable(reason: reason, httpStatus: httpStatus, retryAfter: retryAfter, heldBack: heldBack)
        case .answered(let result, _): .ended(Self.final(result, job, target, attempt: attempt, at: clock()))
        }
    }

    /// Before a send: the TTL, and a consumed cancel of the call. nil: go on.
    @inline(never)
    private func checkBeforeSending(_ job: Job, _ target: Target, attempt: Int, at now: Int64) async -> AttemptEnd? {
        if let expired = Self.expiredBeforeSending(job, target, attempt: attempt, at: now) { return expired }
        return await cancelledCall(job, target, attempts: attempt - 1, at: now)
    }

    /// The TTL passed before the attempt's send.
    @inline(never)
    static func expiredBeforeSending(_ job: Job, _ target: Target, attempt: Int, at now: Int64) -> AttemptEnd? {
        guard job.deadline.isExpired(at: now, attempt: attempt) else { return nil }
        return .finish(
            Outcome(
                job: job, target: target, status: .expired, reason: "TTL of \(job.ttl) s passed before sending",
                attempts: attempt - 1, at: now))
    }

    /// What a send holds from its admission to its answer: the provider, the scope whose slot and circuit it uses, the
    /// circuit's probes and the lane whose turn it takes.
    struct SendSlot: Sendable {
        let provider: any PushProvider
        let scope: DeliveryScope
        let probes: CircuitBreakers.Probes
        let lane: Lane
    }

    /// One send, unless the provider is not enabled or the circuit holds it back: waits for the app's
    /// slot (at most `longestSlotWait`, never past the TTL), checks the TTL again, delivers. A send the
    /// circuit let through as its probe gives the probe back whenever it ends without an answer.
    /// (Only what crosses an `await` stays in this function's async frame, which a job in flight keeps: the steps
    /// between are functions of their own.)
    @inline(never)
    private func send(_ job: Job, _ target: Target, attempt: Int, source: inout Source, at now: Int64) async -> SendResult {
        var holding = false
        var ended: SendResult?
        guard let slot = admitSend(job, target, source: &source, attempt: attempt, at: now, holding: &holding, ended: &ended) else {
            return ended!
        }
        return await sendAdmitted(slot, holding: holding, job, target, attempt: attempt, source: &source, at: now)
    }

    /// A send the provider and its circuit admitted: waits for its slot unless `holding` it, checks the TTL again,
    /// delivers.
    @inline(never)
    func sendAdmitted(
        _ slot: SendSlot, holding: Bool, _ job: Job, _ target: Target, attempt: Int, source: inout Source, at now: Int64
    ) async -> SendResult {
        if !holding {
            let wait = await appLimits.acquire(
                slot.scope, lane: slot.lane, parking: source.parking, until: slotDeadline(job, source: source, at: now))
            if let ended = slotWaitEnded(wait, slot: slot, job, target, attempt: attempt) { return ended }
        }
        // The app's slot may have taken a while: check the TTL again, and the attempt's clock starts now.
        let sendAt = clock()
        if let expired = expiredAtSend(slot, job, target, attempt: attempt, at: sendAt) { return expired }
        let started = ContinuousClock.now
        let result =
            if let tracing {
                await tracedDelivery(slot, tracing: tracing, job, target, attempt: attempt, at: sendAt)
            } else {
                await slot.provider.deliver(Delivery(job: job, target: target, attempt: attempt, now: sendAt, lane: slot.lane))
            }
        return sent(result, slot: slot, target, startedAt: started, source: &source)
    }

    /// Before a send: the provider, its circuit, and the slot reserved before the task started, if it is the scope's
    /// (`holding`). nil when the send does not go ahead, and `ended` says why.
    @inline(never)
    func admitSend(
        _ job: Job, _ target: Target, source: inout Source, attempt: Int, at now: Int64, holding: inout Bool, ended: inout SendResult?
    ) -> SendSlot? {
        guard let provider = providers.provider(for: target.provider) else {
            ended = Self.notEnabled(job, target, attempt: attempt, at: now)
            return nil
        }
        let scope = provider.scope(of: target)
        let (permit, openScope, probes) = breakers.permit(scope, at: now)
        if let held = Self.heldBack(permit, openScope: openScope, target, at: now) {
            // A slot reserved for the first send and not taken is not kept through a wait.
            appLimits.giveBack(&source.slot)
            ended = .answered(held.result, heldBack: held.heldBack)
            return nil
        }
        holding = source.slot.take(for: scope)
        return SendSlot(provider: provider, scope: scope, probes: probes, lane: Lane.delivery(consumedOn: source.lane, kind: job.kind))
    }

    /// How a wait for the slot ended, when the send does not go ahead.
    @inline(never)
    private func slotWaitEnded(
        _ wait: AppConcurrencyLimits.SlotWaitEnd, slot: SendSlot, _ job: Job, _ target: Target, attempt: Int
    ) -> SendResult? {
        switch wait {
        case .granted:
            return nil
        case .cancelled:
            breakers.giveBack(slot.probes, at: clock())
            return .ended(.done(.abandoned))
        case .timedOut:
            let waitedAt = clock()
            breakers.giveBack(slot.probes, at: waitedAt)
            if job.deadline.isExpired(at: waitedAt, attempt: attempt) {
                return Self.expiredWaitingForSlot(job, target, attempt: attempt, at: waitedAt)
            }
            return .answered(
                .retryable(
                    reason: "no slot of this app came free within \(configuration.longestSlotWait.milliseconds) ms; not sent",
                    httpStatus: nil), heldBack: true)
        }
    }

    /// The TTL ended while the send waited for its slot: the slot and the probe go back.
    @inline(never)
    func expiredAtSend(_ slot: SendSlot, _ job: Job, _ target: Target, attempt: Int, at sendAt: Int64) -> SendResult? {
        guard job.deadline.isExpired(at: sendAt, attempt: attempt) else { return nil }
        appLimits.release(slot.scope)
        breakers.giveBack(slot.probes, at: sendAt)
        return Self.expiredWaitingForSlot(job, target, attempt: attempt, at: sendAt)
    }

    @inline(never)
    private func tracedDelivery(
        _ slot: SendSlot, tracing: JobTracing, _ job: Job, _ target: Target, attempt: Int, at sendAt: Int64
    ) async -> DeliveryResult {
        let span = tracing.requestSpan(provider: target.provider, app: metrics.appLabel(of: slot.scope), attempt: attempt)
        let result = await ServiceContext.withValue(span.context) {
            await slot.provider.deliver(Delivery(job: job, target: target, attempt: attempt, now: sendAt, lane: slot.lane))
        }
        JobTracing.end(span, with: result)
        return result
    }

    /// After the provider's answer: the slot goes back, the request is counted and its circuit told.
    @inline(never)
    func sent(
        _ result: DeliveryResult, slot: SendSlot, _ target: Target, startedAt started: ContinuousClock.Instant, source: inout Source
    ) -> SendResult {
        appLimits.release(slot.scope)
        recordSend(result, of: target, in: slot.scope, startedAt: started)
        appLimits.giveBack(&source.slot)
        return .answered(result, heldBack: false)
    }

    /// Until when a send waits for its slot: `longestSlotWait` from now, or the TTL's end if sooner; now when the
    /// job's reservation spent its wait already.
    private func slotDeadline(_ job: Job, source: Source, at now: Int64) -> ContinuousClock.Instant {
        let start = ContinuousClock.now
        if source.slotWaitSpent { return start }
        let longest = configuration.longestSlotWait
        guard !job.deadline.isNowOrNever else { return start + longest }
        let untilExpiry = Duration.milliseconds(job.deadline.remainingMilliseconds(at: now))
        return start + min(longest, untilExpiry)
    }

    @inline(never)
    private static func notEnabled(_ job: Job, _ target: Target, attempt: Int, at now: Int64) -> SendResult {
        .ended(
            .finish(
                Outcome(
                    job: job, target: target, status: .failed,
                    reason: "provider \(target.provider.rawValue) is not enabled on this worker", attempts: attempt - 1, at: now)))
    }

    @inline(never)
    private static func expiredWaitingForSlot(_ job: Job, _ target: Target, attempt: Int, at now: Int64) -> SendResult {
        .ended(
            .finish(
                Outcome(
                    job: job, target: target, status: .expired,
                    reason: "TTL of \(job.ttl) s passed while waiting for a slot of this app", attempts: attempt - 1, at: now)))
    }

    /// The result to record instead of a send while the scope's circuit is open; nil when it may go out.
    @inline(never)
    private static func heldBack(
        _ permit: CircuitBreaker.Permit, openScope: DeliveryScope, _ target: Target,
        at now: Int64
    ) -> (result: DeliveryResult, heldBack: Bool)? {
        switch permit {
        case .allowed, .probe:
            return nil
        case .rejected(.credentials, _):
            return (
                .failed(
                    reason: "circuit open: \(target.provider.rawValue) rejected the credentials of \(openScope.key); not sent",
                    httpStatus: nil, action: .checkCredentials), false
            )
        case .rejected(.failureStorm, let retryAt):
            return (
                .retryable(
                    reason: "circuit open after a failure storm; not sent", httpStatus: nil,
                    retryAfter: .milliseconds(max(retryAt.subtracting(saturating: now), 0))), true
            )
        }
    }

    @inline(never)
    private func recordSend(
        _ result: DeliveryResult, of target: Target, in scope: DeliveryScope, startedAt started: ContinuousClock.Instant
    ) {
        let elapsed = (ContinuousClock.now - started).components
        metrics.requestDuration(target.provider, nanoseconds: elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
        breakers.record(result, in: scope, at: clock())
    }

    /// Attempts count provider requests: a final result without an HTTP status was decided before any request (a
    /// plugin's refusal, `Prepared.refused`; an open circuit), so this attempt made none.
    @inline(never)
    private static func final(_ result: DeliveryResult, _ job: Job, _ target: Target, attempt: Int, at now: Int64) -> AttemptEnd {
        let sent: Bool
        if case .delivered = result { sent = true } else { sent = result.httpStatus != nil }
        return .finish(Outcome(job: job, target: target, result: result, attempts: sent ? attempt : attempt - 1, at: now))
    }

    /// After a retryable answer: a retry (from the retry queue, or after a wait in this task), or the
    /// end of the TTL or of the attempts. (Called only then: its frame is the largest of the steps.)
    @inline(never)
    private func afterRetryable(
        reason: String, httpStatus: Int?, retryAfter: Duration?, heldBack: Bool, _ job: Job, _ target: Target,
        attempt: Int, source: Source, entryId: String?
    ) async -> AttemptEnd {
        let failedAt = clock()
        // Attempts count sends: one the open circuit held back is tried again under the same number.
        let completed = heldBack ? attempt - 1 : attempt
        if let stopped = await cancelledCall(job, target, attempts: completed, at: failedAt) { return stopped }
        let decision =
            heldBack
            ? configuration.retryPolicy.decideHeldBack(now: failedAt, deadline: job.deadline, circuitRetryAfter: retryAfter ?? .zero)
            : configuration.retryPolicy.decide(afterAttempt: attempt, now: failedAt, deadline: job.deadline, retryAfter: retryAfter)
        switch decision {
        case .retry(let dueAt):
            logger.info(
                "delivery will be retried",
                metadata: metadata(
                    job, target,
                    [
                        "attempt": "\(attempt)", "reason": "\(reason)", "retryInMs": "\(dueAt.subtracting(saturating: failedAt))",
                    ]))
            if let retryQueue {
                let entry = RetryEntry(
                    id: entryId ?? RetryEntry.id(jobId: job.id, bindingId: target.bindingId), jobBytes: source.value,
                    kafkaKey: source.key, fallbackCreatedAt: source.fallbackCreatedAt,
                    bindingId: target.bindingId, attempts: completed, lastReason: reason,
                    lastHTTPStatus: httpStatus)
                switch await handOff(entry, dueAt: dueAt, to: retryQueue, job, target, source: source) {
                case .durable: break
                case .finished(let outcome): return .done(.final([.outcome(outcome)]))
                case .abandoned: return .done(.abandoned)
                }
                metrics.retryScheduled(target.provider)
                guard configuration.publishRetryingOutcomes else { return .done(.handedOff([])) }
                return .done(
                    .handedOff([
                        .outcome(
                            Outcome(
                                job: job, target: target,
                                result: .retryable(reason: reason, httpStatus: httpStatus, retryAfter: retryAfter),
                                attempts: completed, at: failedAt))
                    ]))
            }
            // As a hand-off to the retry queue would: the wait holds neither capacity nor the user's key, so the
            // user's next job (a cancel of this call) goes ahead; the cancel is checked before the next send.
            source.parking?.releaseKey()
            source.parking?.park()
            defer { source.parking?.unpark() }
            do { try await sleep(.milliseconds(dueAt.subtracting(saturating: failedAt))) } catch { return .done(.abandoned) }
            return .again(attempt: completed + 1)
        case .expired:
            return .finish(
                Outcome(
                    job: job, target: target, status: .expired,
                    reason: "TTL ends before a retry could be sent (last error: \(reason))",
                    attempts: completed, at: failedAt, httpStatus: httpStatus))
        case .exhausted:
            let outcome = Outcome(
                job: job, target: target, status: .failed,
                reason: "\(attempt) attempts exhausted (last error: \(reason))",
                attempts: attempt, at: failedAt, httpStatus: httpStatus)
            let rejection = JobRejection(.attemptsExhausted, "binding \(target.bindingId): \(outcome.reason!)")
            return .finish(outcome, deadLetter: .deadLetter(rejection, value: source.value, key: source.key, source: source.description))
        }
    }

    /// How a hand-off to the retry queue ended.
    enum HandOff {
        /// The entry is durable in the queue: the job's offset may be committed.
        case durable
        /// The queue ran the entry to its end meanwhile: this outcome is recorded (and is published again).
        case finished(Outcome)
        /// A stop or a revocation cancelled the wait: the job stays uncommitted.
        case abandoned
    }

    /// Hands `entry` to the retry queue until it is durable there. A write no replica acknowledged in time
    /// (`ReplicationShortfall`) is on the queue's primary only: the store stays healthy, and a consumed job lets its
    /// key go and parks (it holds no in-flight capacity; the queue may run the entry meanwhile), then asks the queue
    /// whether the entry is there and durable (`confirm`), never writing it again over a claim that may hold it; an
    /// entry gone with no record of its end was lost with its node and is written again. A claimed retry's entry was
    /// durable before its claim: a shortfall of its new version leaves the replica the version before, due again later.
    @inline(never)
    private func handOff(
        _ entry: RetryEntry, dueAt: Int64, to queue: any RetryQueue, _ job: Job, _ target: Target, source: Source
    ) async -> HandOff {
        var retries = StoreRetries()
        var written = false
        var parked = false
        defer { if parked { source.parking?.unpark() } }
        while true {
            do {
                if !written {
                    try await queue.schedule(entry, dueAt: dueAt)
                    storeAnswered()
                    return .durable
                }
                if try await queue.confirm(entry.id) {
                    storeAnswered()
                    return .durable
                }
                if let outcome = try await store.recordedOutcome(of: job, target: target) {
                    storeAnswered()
                    return .finished(outcome)
                }
                written = false
                continue
            } catch let shortfall as ReplicationShortfall {
                replicationFellShort(shortfall)
                if case .retryEntry = source.location { return .durable }
                written = true
                if !parked {
                    source.parking?.releaseKey()
                    source.parking?.park()
                    parked = true
                }
            } catch {
                storeFailed(error)
            }
            guard await retries.pause() else { return .abandoned }
        }
    }

    /// A call whose cancel was consumed ends here: no further attempt, not even one already due.
    /// nil: not a call with a cancel key, or not cancelled; `.done(.abandoned)` when a stop interrupts the store.
    @inline(never)
    private func cancelledCall(_ job: Job, _ target: Target, attempts: Int, at now: Int64) async -> AttemptEnd? {
        guard job.kind == .call, CallCancellation.key(of: job) != nil else { return nil }
        guard let found = await withStore({ try await store.cancellation(of: job, bindingId: target.bindingId) }) else {
            return .done(.abandoned)
        }
        guard let cancellation = found, cancellation.stops(job) else { return nil }
        return .finish(
            Outcome(
                job: job, target: target, status: .expired, reason: "cancelled by job \(cancellation.cancelJobId)",
                attempts: attempts, at: now))
    }
}

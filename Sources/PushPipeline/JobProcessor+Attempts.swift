import PushCore

extension JobProcessor {
    /// Attempts one target from attempt `first` until it is final, handed to the retry
    /// queue, or abandoned by a stop.
    func attempt(_ job: Job, _ target: Target, startingAt first: Int, source: Source, entryId: String?) async -> TargetResult {
        let deadline = job.deadline
        var attempt = first
        while true {
            let now = clock()
            if deadline.isExpired(at: now, attempt: attempt) {
                return await finish(Outcome(job: job, target: target, status: .expired,
                                            reason: "TTL of \(job.ttl) s passed before sending", attempts: attempt - 1, at: now))
            }
            if let stopped = await cancelledCall(job, target, attempts: attempt - 1, at: now) { return stopped }
            guard let provider = registry.provider(for: target.provider) else {
                return await finish(Outcome(job: job, target: target, status: .failed,
                                            reason: "provider \(target.provider.rawValue) is not enabled on this worker",
                                            attempts: attempt - 1, at: now))
            }
            let scope = provider.scope(of: target)
            let result: DeliveryResult
            var heldBack = false
            let (permit, openScope) = breakers.permit(scope, at: now)
            switch permit {
            case .rejected(.credentials, _):
                result = .failed(reason: "circuit open: \(target.provider.rawValue) rejected the credentials of \(openScope.key); not sent",
                                 httpStatus: nil, action: .checkCredentials)
            case .rejected(.failureStorm, let retryAt):
                heldBack = true
                result = .retryable(reason: "circuit open after a failure storm; not sent", httpStatus: nil,
                                    retryAfter: .milliseconds(max(retryAt.subtracting(saturating: now), 0)))
            case .allowed:
                let lane = Lane.delivery(consumedOn: source.lane, kind: job.kind)
                if source.slot?.take(for: scope) != true {
                    guard await appLimits.acquire(scope, lane: lane, parking: source.parking) else { return .abandoned }
                }
                // The app's slot may have taken a while: check the TTL again, and the attempt's clock starts now.
                let sendAt = clock()
                if deadline.isExpired(at: sendAt, attempt: attempt) {
                    appLimits.release(scope)
                    return await finish(Outcome(job: job, target: target, status: .expired,
                                                reason: "TTL of \(job.ttl) s passed while waiting for a slot of this app",
                                                attempts: attempt - 1, at: sendAt))
                }
                let started = ContinuousClock.now
                result = await provider.deliver(Delivery(job: job, target: target, attempt: attempt, now: sendAt, lane: lane))
                appLimits.release(scope)
                let elapsed = (ContinuousClock.now - started).components
                metrics.requestDuration(target.provider, nanoseconds: elapsed.seconds * 1_000_000_000 + elapsed.attoseconds / 1_000_000_000)
                breakers.record(result, in: scope, at: clock())
            }
            // A slot reserved for the first send and not taken (the circuit held it back) is not kept through a wait.
            source.slot?.giveBack()
            guard case .retryable(let reason, let httpStatus, let retryAfter) = result else {
                return await finish(Outcome(job: job, target: target, result: result, attempts: attempt, at: clock()))
            }

            let failedAt = clock()
            if let stopped = await cancelledCall(job, target, attempts: attempt, at: failedAt) { return stopped }
            // Attempts count sends: one the open circuit held back is tried again under the same number.
            let completed = heldBack ? attempt - 1 : attempt
            let decision = heldBack
                ? configuration.retryPolicy.decideHeldBack(now: failedAt, deadline: deadline, circuitRetryAfter: retryAfter ?? .zero)
                : configuration.retryPolicy.decide(afterAttempt: attempt, now: failedAt, deadline: deadline, retryAfter: retryAfter)
            switch decision {
            case .retry(let dueAt):
                logger.info("delivery will be retried", metadata: metadata(job, target, [
                    "attempt": "\(attempt)", "reason": "\(reason)", "retryInMs": "\(dueAt.subtracting(saturating: failedAt))",
                ]))
                if let retryQueue {
                    let entry = RetryEntry(id: entryId ?? RetryEntry.id(jobId: job.id, bindingId: target.bindingId), jobBytes: source.value,
                                           kafkaKey: source.key, fallbackCreatedAt: source.fallbackCreatedAt,
                                           bindingId: target.bindingId, attempts: completed, lastReason: reason,
                                           lastHTTPStatus: httpStatus)
                    guard await withStore({ try await retryQueue.schedule(entry, dueAt: dueAt) }) != nil else { return .abandoned }
                    metrics.retryScheduled(target.provider)
                    guard configuration.publishRetryingOutcomes else { return .handedOff([]) }
                    return .handedOff([.outcome(Outcome(job: job, target: target, result: result, attempts: completed, at: failedAt))])
                }
                do { try await sleep(.milliseconds(dueAt.subtracting(saturating: failedAt))) } catch { return .abandoned }
                attempt = completed + 1
            case .expired:
                return await finish(Outcome(job: job, target: target, status: .expired,
                                            reason: "TTL ends before a retry could be sent (last error: \(reason))",
                                            attempts: completed, at: failedAt, httpStatus: httpStatus))
            case .exhausted:
                let outcome = Outcome(job: job, target: target, status: .failed,
                                      reason: "\(attempt) attempts exhausted (last error: \(reason))",
                                      attempts: attempt, at: failedAt, httpStatus: httpStatus)
                let rejection = JobRejection(.attemptsExhausted, "binding \(target.bindingId): \(outcome.reason!)")
                return await finish(outcome, deadLetter: .deadLetter(rejection, value: source.value, key: source.key,
                                                                     source: source.description))
            }
        }
    }

    /// A call whose cancel was consumed ends here: no further attempt, not even one already due.
    /// nil: not a call with a cancel key, or not cancelled; `.abandoned` when a stop interrupts the store.
    private func cancelledCall(_ job: Job, _ target: Target, attempts: Int, at now: Int64) async -> TargetResult? {
        guard job.kind == .call, CallCancellation.key(of: job) != nil else { return nil }
        guard let found = await withStore({ try await store.cancellation(of: job, bindingId: target.bindingId) }) else {
            return .abandoned
        }
        guard let cancellation = found, cancellation.stops(job) else { return nil }
        return await finish(Outcome(job: job, target: target, status: .expired, reason: "cancelled by job \(cancellation.cancelJobId)",
                                    attempts: attempts, at: now))
    }
}

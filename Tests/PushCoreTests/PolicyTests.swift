import Testing
import Synchronization
@testable import PushCore

@Suite("TTL arithmetic")
struct DeadlineTests {
    @Test("a job expires when createdAt + ttl is reached")
    func expiry() {
        let deadline = Deadline(createdAt: 10_000, ttlSeconds: 30)
        #expect(deadline.expiresAt == 40_000)
        #expect(!deadline.isExpired(at: 39_999))
        #expect(deadline.isExpired(at: 40_000))
    }

    @Test("remaining TTL is whole seconds rounded down, never negative")
    func remaining() {
        let deadline = Deadline(createdAt: 0, ttlSeconds: 30)
        #expect(deadline.remainingSeconds(at: 500) == 29)
        #expect(deadline.remainingSeconds(at: 0) == 30)
        #expect(deadline.remainingSeconds(at: 31_000) == 0)
    }

    @Test("ttl 0 is now or never: the first attempt goes out with TTL 0, no retry")
    func nowOrNever() {
        let deadline = Deadline(createdAt: 0, ttlSeconds: 0)
        #expect(!deadline.isExpired(at: 1_000_000, attempt: 1))
        #expect(deadline.isExpired(at: 1_000_000, attempt: 2))
        #expect(deadline.remainingSeconds(at: 0) == 0)
        #expect(!deadline.allowsRetry(dueAt: 1))
    }

    @Test("huge TTLs saturate instead of overflowing")
    func overflow() {
        #expect(Deadline(createdAt: .max - 10, ttlSeconds: 1_000).expiresAt == .max)
    }
}

@Suite("Retry policy: exponential backoff, full jitter, Retry-After, TTL")
struct RetryPolicyTests {
    let policy = RetryPolicy(baseMilliseconds: 1000, maximumMilliseconds: 8000, maximumAttempts: 5)
    let deadline = Deadline(createdAt: 0, ttlSeconds: 3600)

    @Test("the jitter window doubles per attempt up to the cap")
    func ceilings() {
        #expect((1...6).map { policy.backoffCeiling(afterAttempt: $0) } == [1000, 2000, 4000, 8000, 8000, 8000])
    }

    @Test("the delay is drawn uniformly from [0, ceiling] (full jitter)")
    func fullJitter() {
        var asked: [Int64] = []
        let decision = policy.decide(afterAttempt: 3, now: 100, deadline: deadline, retryAfter: nil) { upper in
            asked.append(upper)
            return upper / 2
        }
        #expect(asked == [4000])
        #expect(decision == .retry(atMilliseconds: 2100))
        for _ in 0..<200 {
            guard case .retry(let at) = policy.decide(afterAttempt: 2, now: 0, deadline: deadline, retryAfter: nil) else {
                Issue.record("expected a retry")
                return
            }
            #expect((0...2000).contains(at))
        }
    }

    @Test("Retry-After is a lower bound on the delay")
    func retryAfter() {
        let decision = policy.decide(afterAttempt: 1, now: 0, deadline: deadline, retryAfter: .seconds(7)) { _ in 10 }
        #expect(decision == .retry(atMilliseconds: 7000))
    }

    @Test("a retry that would fall after the TTL is an expiry instead")
    func pastTTL() {
        let short = Deadline(createdAt: 0, ttlSeconds: 2)
        #expect(policy.decide(afterAttempt: 1, now: 1500, deadline: short, retryAfter: nil) { _ in 600 } == .expired)
        #expect(policy.decide(afterAttempt: 1, now: 1500, deadline: short, retryAfter: nil) { _ in 400 } == .retry(atMilliseconds: 1900))
    }

    @Test("the attempt budget counts the first attempt")
    func exhausted() {
        #expect(policy.decide(afterAttempt: 5, now: 0, deadline: deadline, retryAfter: nil) == .exhausted)
        #expect(policy.decide(afterAttempt: 4, now: 0, deadline: deadline, retryAfter: nil) { _ in 0 } == .retry(atMilliseconds: 0))
    }

    @Test("a now-or-never job is never retried")
    func nowOrNever() {
        #expect(policy.decide(afterAttempt: 1, now: 0, deadline: Deadline(createdAt: 0, ttlSeconds: 0), retryAfter: nil) == .expired)
    }
}

@Suite("Outcome contract")
struct OutcomeTests {
    let job = Job(
        id: "j1", createdAt: 0, ttl: 30, kind: .call, priority: .high, userId: "alice",
        targets: [Target(bindingId: "b1", provider: "apns", app: "com.example.chat")])

    @Test("an outcome encodes every contract field in order, nulls included")
    func encoding() {
        let outcome = Outcome(
            job: job, target: job.targets[0],
            result: .rejected(reason: "Unregistered", httpStatus: 410, invalidSince: 1_795_310_000_000),
            attempts: 1, at: 1_795_310_000_123)
        #expect(
            String(decoding: outcome.encoded(), as: UTF8.self)
                == #"{"v":1,"jobId":"j1","userId":"alice","bindingId":"b1","provider":"apns","app":"com.example.chat","status":"rejected","reason":"Unregistered","httpStatus":410,"providerMessageId":null,"action":"remove_binding","invalidSince":1795310000000,"attempts":1,"at":1795310000123}"#
        )
    }

    @Test("a dead target yields rejected with remove_binding")
    func rejectedMeansRemoveBinding() {
        let outcome = Outcome(job: job, target: job.targets[0], result: .rejected(reason: "gone", httpStatus: 403), attempts: 1, at: 0)
        #expect(outcome.status == .rejected)
        #expect(outcome.action == .removeBinding)
    }

    @Test("credential failures carry check_credentials, other failures none")
    func failures() {
        let credentials = Outcome(
            job: job, target: job.targets[0],
            result: .failed(reason: "InvalidProviderToken", httpStatus: 403, action: .checkCredentials),
            attempts: 1, at: 0)
        #expect(credentials.status == .failed)
        #expect(credentials.action == .checkCredentials)
        let payload = Outcome(job: job, target: job.targets[0], result: .failed(reason: "bad", httpStatus: 400), attempts: 1, at: 0)
        #expect(payload.action == .none)
    }

    @Test("a delivery carries the provider's message id")
    func delivered() {
        let outcome = Outcome(
            job: job, target: job.targets[0], result: .delivered(providerMessageId: "m-1", httpStatus: 200),
            attempts: 2, at: 0)
        #expect(outcome.status == .delivered)
        #expect(outcome.providerMessageId == "m-1")
        #expect(outcome.attempts == 2)
    }
}

@Suite("Circuit breaker state machine")
struct CircuitBreakerTests {
    let settings = CircuitBreaker.Settings(failureThreshold: 3, coolDownMilliseconds: 1000)

    @Test("a credential failure opens at once; after the cool-down one probe goes; its success closes")
    func credentials() {
        var breaker = CircuitBreaker(settings: settings)
        #expect(breaker.permit(at: 0) == .allowed)
        let opened = breaker.record(.failed(reason: "BadCertificate", httpStatus: 403, action: .checkCredentials), at: 0)
        #expect(opened)
        #expect(breaker.permit(at: 999) == .rejected(cause: .credentials, retryAt: 1000))
        guard case .probe = breaker.permit(at: 1000) else {
            Issue.record("the first send after the cool-down is the probe")
            return
        }
        if case .rejected = breaker.permit(at: 1001) {} else { Issue.record("only one probe while half-open") }
        breaker.record(.delivered(providerMessageId: nil, httpStatus: 200), at: 1002)
        #expect(breaker.state == .closed(consecutiveFailures: 0))
    }

    @Test("N transient failures in a row open it; a success in between resets the count")
    func storm() {
        var breaker = CircuitBreaker(settings: settings)
        let transient = DeliveryResult.retryable(reason: "503", httpStatus: 503)
        breaker.record(transient, at: 0)
        breaker.record(transient, at: 0)
        breaker.record(.rejected(reason: "gone", httpStatus: 410), at: 0)
        breaker.record(transient, at: 0)
        breaker.record(transient, at: 0)
        #expect(!breaker.isOpen)
        let opened = breaker.record(transient, at: 5)
        #expect(opened)
        #expect(breaker.permit(at: 10) == .rejected(cause: .failureStorm, retryAt: 1005))
    }

    @Test("a failed probe opens the circuit again for a full cool-down")
    func failedProbe() {
        var breaker = CircuitBreaker(settings: settings)
        breaker.record(.failed(reason: "x", httpStatus: 401, action: .checkCredentials), at: 0)
        #expect(breaker.permit(at: 1000).isAllowed)
        breaker.record(.failed(reason: "x", httpStatus: 401, action: .checkCredentials), at: 1000)
        #expect(breaker.permit(at: 1500) == .rejected(cause: .credentials, retryAt: 2000))
    }

    @Test("a probe given back because its send did not happen lets the next send probe at once")
    func probeGivenBack() {
        var breaker = CircuitBreaker(settings: .init(failureThreshold: 3, coolDownMilliseconds: 1000, probeLeaseMilliseconds: 60_000))
        breaker.record(.failed(reason: "x", httpStatus: 403, action: .checkCredentials), at: 0)
        guard case .probe(let abandoned) = breaker.permit(at: 1000) else {
            Issue.record("no probe after the cool-down")
            return
        }
        #expect(!breaker.permit(at: 1001).isAllowed, "one probe at a time")
        breaker.giveBack(abandoned)
        guard case .probe(let next) = breaker.permit(at: 1002) else {
            Issue.record("the probe given back still holds the circuit")
            return
        }
        breaker.giveBack(abandoned)
        #expect(!breaker.permit(at: 1003).isAllowed, "giving back an old probe again does not release the current one")
        breaker.record(.delivered(providerMessageId: nil, httpStatus: 200), at: 1004)
        #expect(breaker.state == .closed(consecutiveFailures: 0))
        _ = next
    }

    @Test("a probe that never reports is taken back when its lease ends: the scope is not silenced for good")
    func probeLeaseEnds() {
        var breaker = CircuitBreaker(settings: .init(failureThreshold: 1, coolDownMilliseconds: 1000, probeLeaseMilliseconds: 5000))
        breaker.record(.retryable(reason: "503", httpStatus: 503), at: 0)
        guard case .probe(let silent) = breaker.permit(at: 1000) else {
            Issue.record("no probe after the cool-down")
            return
        }
        #expect(silent.leaseEnd == 6000)
        guard case .rejected(_, let retryAt) = breaker.permit(at: 5999) else {
            Issue.record("a second probe inside the lease")
            return
        }
        #expect(retryAt <= 6000, "held-back sends are due no later than the lease's end")
        guard case .probe(let replacement) = breaker.permit(at: 6000) else {
            Issue.record("the lapsed probe still holds the circuit")
            return
        }
        #expect(replacement.number != silent.number)
        breaker.record(.retryable(reason: "503", httpStatus: 503), at: 6001)
        #expect(breaker.state == .open(cause: .failureStorm, until: 7001), "the replacement probe's failure opens it again")
    }
}

@Suite("In-memory store")
struct InMemoryDeliveryStoreTests {
    final class Now: Sendable {
        let milliseconds = Mutex<Int64>(1_000_000)
    }

    static func job(_ index: Int) -> Job {
        Job(
            id: "j\(index)", createdAt: 0, ttl: 30, kind: .message, priority: .normal, userId: "u\(index)",
            dedupeKey: "d\(index)", targets: [Target(bindingId: "b\(index)", provider: "apns")])
    }

    @Test("expired claims and outcomes are dropped as operations go on, and entries still live are kept")
    func expiredEntriesAreSwept() async throws {
        let now = Now()
        let store = InMemoryDeliveryStore(recordRetention: .seconds(1), clock: { now.milliseconds.withLock { $0 } })
        for index in 0..<3000 {
            _ = try await store.prepare(Self.job(index), dedupeWindow: 1000)
            try await store.record(
                Outcome(job: Self.job(index), target: Self.job(index).targets[0], status: .delivered, reason: nil, attempts: 1, at: 0))
        }
        #expect(store.heldEntries == 6000)
        now.milliseconds.withLock { $0 += 2000 }
        for index in 3000..<9000 { _ = try await store.prepare(Self.job(index), dedupeWindow: 60_000) }
        #expect(store.heldEntries <= 6000, "the expired 6000 were never dropped")
        #expect(store.heldEntries >= 1, "live claims must stay")
        let again = try await store.prepare(Self.job(8999), dedupeWindow: 60_000)
        #expect(again == [.fresh], "the same job is not a duplicate of itself")
        let other = Job(
            id: "other", createdAt: 0, ttl: 30, kind: .message, priority: .normal, userId: "u8999",
            dedupeKey: "d8999", targets: [Target(bindingId: "b8999", provider: "apns")])
        #expect(try await store.prepare(other, dedupeWindow: 60_000) == [.duplicate(ofJob: "j8999")], "a live claim was swept")
    }
}

import PushCore
import PushKafka
import Synchronization
import Tracing

/// The one way a job ends, whatever it is (a consumed job of one target or of many, a retry from the queue): its
/// final outcomes recorded in the store, then published, then acknowledged by the broker. No task waits for
/// either answer: each step goes on where the previous one's answer arrives (the store's thread, then the
/// producer's). The caller then acknowledges the job its own way: a consumed job's offset moves on, a retry
/// entry is completed.
struct OutcomeHandOff: Sendable {
    /// How the job ended.
    enum Ending: Sendable {
        /// The broker acknowledged these publications. `handedOff`: a target went (back) to the retry queue, so a
        /// retry entry must not be completed. `recordedAt`: when the store answered (the end of processing).
        case acknowledged([Publication], handedOff: Bool, recordedAt: ContinuousClock.Instant)
        /// A stop interrupted it (or `givingUp` said so at a failure): it stays uncommitted, or leased, and is processed again.
        case abandoned
    }

    let processor: JobProcessor
    let publisher: OutcomePublisher

    /// Records, publishes and waits for the acknowledgement of `processed` (nil: abandoned already); `then` runs
    /// once, on the thread of the last answer. A failing store or broker is tried again until `givingUp` says to stop.
    /// `span`: the job's CONSUMER span, when traced: its outcomes are published under a PRODUCER span of its own, whose
    /// context their records carry, and both end with the job.
    func finish(
        _ processed: JobProcessor.ProcessedTargets?, span: (any Span)? = nil, givingUp: @escaping @Sendable () -> Bool,
        then done: @escaping @Sendable (Ending) -> Void
    ) {
        guard let processed else {
            PendingOutcomes.end(span, .abandoned)
            return done(.abandoned)
        }
        PendingOutcomes(
            processor: processor, processed: processed, trace: span?.context, givingUp: givingUp,
            next: .publish(publisher, span: span, then: done)
        ).start()
    }

    /// `finish` for a task (a retry's): it gives up at the next failure once the task is cancelled.
    func finish(_ processed: JobProcessor.ProcessedTargets?) async -> Ending {
        await withGivingUpOnCancel { givingUp, done in finish(processed, givingUp: givingUp, then: done) }
    }
}

/// One job's outcomes on their way to the store and the broker: its steps are this object's methods, so each answer (the store's, the broker's)
/// hands the next step only the object, with no closure made per step. A failed step is tried again after its
/// `RetryWait`, until `givingUp` says to stop.
final class PendingOutcomes: Sendable {
    /// What follows the recording.
    enum Next: Sendable {
        /// Nothing: `done` gets what to publish (`JobProcessor.record`).
        case report(@Sendable (ProcessedJob, [EncodedOutcome]) -> Void)
        /// Publishing, then `done` once the broker acknowledged (`OutcomeHandOff.finish`). `span` ends with the job.
        case publish(OutcomePublisher, span: (any Span)?, then: @Sendable (OutcomeHandOff.Ending) -> Void)
    }

    private let processor: JobProcessor
    private let processed: JobProcessor.ProcessedTargets
    private let outcomes: [EncodedOutcome]
    private let trace: ServiceContext?
    private let givingUp: @Sendable () -> Bool
    private let next: Next

    /// `trace`: the job's span context, under which its finished deliveries are logged (their lines then carry its ids).
    init(
        processor: JobProcessor, processed: JobProcessor.ProcessedTargets, trace: ServiceContext?,
        givingUp: @escaping @Sendable () -> Bool, next: Next
    ) {
        self.processor = processor
        self.processed = processed
        outcomes = processed.outcomesToRecord.map(EncodedOutcome.init)
        self.trace = trace
        self.givingUp = givingUp
        self.next = next
    }

    func start() {
        guard !outcomes.isEmpty else { return recorded() }
        record(retryingAfter: .store)
    }

    private func record(retryingAfter wait: RetryWait) {
        processor.store.record(outcomes) { [self] error in
            guard let error else {
                processor.storeAnswered()
                return recorded()
            }
            processor.storeFailed(error)
            again(after: wait) { [self] in record(retryingAfter: wait.next) }
        }
    }

    private func recorded() {
        let job =
            trace.map { trace in ServiceContext.withValue(trace) { processor.published(processed) } } ?? processor.published(processed)
        switch next {
        case .report(let done): done(job, outcomes)
        case .publish(let publisher, let span, _):
            guard case .publish(let publications, let handedOff) = job else { return end(.abandoned) }
            let producerSpan = span.flatMap { span in
                processor.tracing?.producerSpan(topic: publisher.outcomesTopic, records: publications.count, parent: span.context)
            }
            let traceHeaders = producerSpan.flatMap { processor.tracing?.headers(carrying: $0.context) } ?? []
            let publishing = Publishing(
                publications: publications, handedOff: handedOff, recordedAt: .now, producerSpan: producerSpan,
                traced: !traceHeaders.isEmpty, records: publisher.records(for: publications, encoded: outcomes, traceHeaders: traceHeaders))
            publish(publishing, with: publisher, retryingAfter: .publish)
        }
    }

    /// What is published, and what the ending reports.
    private struct Publishing: Sendable {
        let publications: [Publication]
        let handedOff: Bool
        let recordedAt: ContinuousClock.Instant
        let producerSpan: (any Span)?
        /// Whether the records carry trace headers (the first form to drop when one is refused for good).
        let traced: Bool
        /// What the next send sends: at first a record per publication, in their order; after a failure, only those
        /// not acknowledged yet, each in the form `pending` says.
        var records: [KafkaRecord]
        /// nil until a send fails (nothing made per record while sends succeed); then `records`' publications and forms.
        var pending: [PendingRecord]? = nil
        var gaveUp = false

        /// `records` as pending records, as they were first sent.
        var sent: [PendingRecord] {
            pending
                ?? records.indices.map { index in
                    PendingRecord(publication: index, form: traced ? .asBuilt : .withoutTraceHeaders, record: records[index], refusal: nil)
                }
        }
    }

    /// Sends what is left of `publishing`. A record that failed for a transient reason is sent again after `wait`; one
    /// refused for good (`KafkaError.refusesRecordForGood`) is sent again at once in its next, smaller form, or given
    /// up (`RecordForm`), so that such a record never holds its job. Acknowledged records are never sent again.
    private func publish(_ publishing: Publishing, with publisher: OutcomePublisher, retryingAfter wait: RetryWait) {
        publisher.producer.produce(publishing.records) { [self] result in
            guard case .failure(let undelivered) = result else { return published(publishing) }
            var publishing = publishing
            let next = publisher.nextRound(after: undelivered, of: publishing.sent, publications: publishing.publications)
            publishing.pending = next.records
            publishing.records = next.records.map(\.record)
            publishing.gaveUp = publishing.gaveUp || next.gaveUp
            guard !next.records.isEmpty else { return published(publishing) }
            guard next.transient else { return publish(publishing, with: publisher, retryingAfter: wait) }
            publisher.failed(undelivered.failures.first { !$0.error.refusesRecordForGood }?.error ?? undelivered.first)
            again(after: wait) { [self, publishing] in
                publish(publishing, with: publisher, retryingAfter: wait.next)
            } orElse: {
                publishing.producerSpan?.setStatus(SpanStatus(code: .error))
                publishing.producerSpan?.end()
            }
        }
    }

    /// Every record acknowledged, or given up: the job ends.
    private func published(_ publishing: Publishing) {
        if publishing.gaveUp { publishing.producerSpan?.setStatus(SpanStatus(code: .error, message: "a record was refused for good")) }
        publishing.producerSpan?.end()
        end(.acknowledged(publishing.publications, handedOff: publishing.handedOff, recordedAt: publishing.recordedAt))
    }

    /// After a failure: `step` again once `wait` passed, or the job abandoned when `givingUp` says so (then `orElse` first).
    private func again(after wait: RetryWait, _ step: @escaping @Sendable () -> Void, orElse: () -> Void = {}) {
        guard !givingUp() else {
            orElse()
            return abandon()
        }
        Task { [givingUp] in
            await Self.pause(for: wait.duration, unless: givingUp)
            step()
        }
    }

    private func abandon() {
        switch next {
        case .report(let done): done(.abandoned, [])
        case .publish: end(.abandoned)
        }
    }

    private func end(_ ending: OutcomeHandOff.Ending) {
        guard case .publish(_, let span, let done) = next else { return }
        Self.end(span, ending)
        done(ending)
    }

    /// Ends the job's span, if it has one: an error when the job was abandoned.
    static func end(_ span: (any Span)?, _ ending: OutcomeHandOff.Ending) {
        guard let span else { return }
        if case .abandoned = ending { span.setStatus(SpanStatus(code: .error, message: "abandoned: redelivered later")) }
        span.end()
    }

    /// Waits `duration`, ending early (within 100 ms) once `givingUp` says so.
    static func pause(for duration: Duration, unless givingUp: @Sendable () -> Bool) async {
        var waited = Duration.zero
        while waited < duration, !givingUp() {
            try? await Task.sleep(for: min(.milliseconds(100), duration - waited))
            waited += .milliseconds(100)
        }
    }
}

/// Runs a callback-driven operation for the current task and waits for its one answer: `givingUp` turns true once
/// the task is cancelled, and the operation ends at its next failure.
func withGivingUpOnCancel<Answer: Sendable>(
    _ operation: (_ givingUp: @escaping @Sendable () -> Bool, _ done: @escaping @Sendable (Answer) -> Void) -> Void
) async -> Answer {
    let cancelled = Atomic<Bool>(false)
    return await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            operation({ cancelled.load(ordering: .relaxed) }, { continuation.resume(returning: $0) })
        }
    } onCancel: {
        cancelled.store(true, ordering: .relaxed)
    }
}

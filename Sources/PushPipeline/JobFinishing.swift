import PushCore
import Synchronization
import Tracing

/// The one way a job ends, whatever it is (a consumed job of one target or of many, a retry from the queue): its
/// final outcomes recorded in the store, then published, then acknowledged by the broker. No task waits for
/// either answer: each step goes on where the previous one's answer arrives (the store's thread, then the
/// producer's). The caller then acknowledges the job its own way: a consumed job's offset moves on, a retry
/// entry is completed.
struct JobFinishing: Sendable {
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
        let done = Self.endingSpan(span, then: done)
        guard let processed else { return done(.abandoned) }
        processor.record(processed, trace: span?.context, givingUp: givingUp) { [processor, publisher] recorded, encoded in
            guard case .publish(let publications, let handedOff) = recorded else { return done(.abandoned) }
            let recordedAt = ContinuousClock.now
            let producerSpan = span.flatMap { span in
                processor.tracing?.producerSpan(topic: publisher.outcomesTopic, records: publications.count, parent: span.context)
            }
            let traceHeaders = producerSpan.flatMap { processor.tracing?.headers(carrying: $0.context) } ?? []
            publisher.publish(publications, encoded: encoded, traceHeaders: traceHeaders, givingUp: givingUp) { acknowledged in
                if let producerSpan {
                    if !acknowledged { producerSpan.setStatus(SpanStatus(code: .error)) }
                    producerSpan.end()
                }
                done(acknowledged ? .acknowledged(publications, handedOff: handedOff, recordedAt: recordedAt) : .abandoned)
            }
        }
    }

    /// `done`, after it ends the job's span (if any), marked an error when the job was abandoned.
    private static func endingSpan(_ span: (any Span)?, then done: @escaping @Sendable (Ending) -> Void) -> @Sendable (Ending) -> Void {
        guard let span else { return done }
        return { ending in
            if case .abandoned = ending { span.setStatus(SpanStatus(code: .error, message: "abandoned: redelivered later")) }
            span.end()
            done(ending)
        }
    }

    /// `finish` for a task (a retry's): it gives up at the next failure once the task is cancelled.
    func finish(_ processed: JobProcessor.ProcessedTargets?) async -> Ending {
        await withGivingUpOnCancel { givingUp, done in finish(processed, givingUp: givingUp, then: done) }
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

import Logging
import Metrics
import PushCore
import PushKafka

/// What a record refused for good (`KafkaError.refusesRecordForGood`: larger than `message.max.bytes`, an invalid
/// record) becomes: it can never be acknowledged as it is, and publishing "until acknowledged" would hold its job,
/// and the partition behind it, forever. So each such refusal takes that record, alone, one step down, and a record
/// is never sent twice in the same form:
///
/// - an outcome: as built → without its trace headers (`traceparent`, `tracestate`: optional; the CloudEvents
///   headers are the contract and stay) → a dead letter with the outcome JSON as its value, code `outcome_too_large`
///   (or `outcome_refused`) and a reason naming the error → that dead letter without its value → given up;
/// - a dead letter: as built → without its trace headers → without its value (`push-dlq-truncated` then says the
///   original size) → given up.
///
/// A record given up is counted (`push_publish_dropped_total`) and logged with its job and binding (never its
/// bytes), and its job still ends, so its offset commits. Any other error is transient: the record is sent again as
/// it is, after the job's `RetryWait`, as before.
enum RecordForm: Sendable, Equatable {
    case asBuilt
    case withoutTraceHeaders
    /// An outcome that could not be published, as a dead letter.
    case deadLetter
    case deadLetterWithoutValue

    /// The step after this one for a record of `publication`; nil: nothing is left to try.
    func next(for publication: Publication) -> RecordForm? {
        switch (self, publication) {
        case (.asBuilt, _): .withoutTraceHeaders
        case (.withoutTraceHeaders, .outcome): .deadLetter
        case (.withoutTraceHeaders, .deadLetter), (.deadLetter, _): .deadLetterWithoutValue
        case (.deadLetterWithoutValue, _): nil
        }
    }
}

/// A record of a job not yet acknowledged after a failed send: which of the job's publications it is, and in which form.
struct PendingRecord: Sendable {
    let publication: Int
    let form: RecordForm
    let record: KafkaRecord
    /// The error that first refused this publication for good: the reason of an outcome's dead letter.
    let refusal: KafkaError?
}

/// `push_publish_dropped_total{topic_kind}`: records given up after every form of them was refused for good, by what
/// was lost (`outcomes`, `dead_letters`).
struct PublishDropCounters: Sendable {
    let outcomes = Counter(label: "push_publish_dropped_total", dimensions: [("topic_kind", "outcomes")])
    let deadLetters = Counter(label: "push_publish_dropped_total", dimensions: [("topic_kind", "dead_letters")])
}

extension OutcomePublisher {
    /// `push-dlq-code` of an outcome that could not be published: larger than the producer or broker takes.
    public static let outcomeTooLargeCode = "outcome_too_large"
    /// `push-dlq-code` of an outcome refused for good for another reason (an invalid record).
    public static let outcomeRefusedCode = "outcome_refused"

    /// The job's records still to send after `undelivered` (of `sent`): a record failed for a transient reason as it
    /// was, one refused for good in its next form, unless none is left (then it is given up). `transient`: whether
    /// any failure was transient (the job then waits before sending again); `gaveUp`: whether a record was given up.
    func nextRound(after undelivered: UndeliveredRecords, of sent: [PendingRecord], publications: [Publication]) -> (
        records: [PendingRecord], transient: Bool, gaveUp: Bool
    ) {
        var next: [PendingRecord] = []
        var transient = false
        var gaveUp = false
        for failure in undelivered.failures {
            let pending = sent[failure.index]
            guard failure.error.refusesRecordForGood else {
                transient = true
                next.append(pending)
                continue
            }
            let publication = publications[pending.publication]
            let refusal = pending.refusal ?? failure.error
            guard let form = pending.form.next(for: publication) else {
                dropped(publication, error: failure.error)
                gaveUp = true
                continue
            }
            logger.warning(
                "a record was refused for good; sending it in a smaller form",
                metadata: ["error": "\(failure.error)", "form": "\(form)", "topic": "\(pending.record.topic)"])
            next.append(
                PendingRecord(
                    publication: pending.publication, form: form,
                    record: record(of: publication, as: form, refused: pending.record, refusal: refusal), refusal: refusal))
        }
        return (next, transient, gaveUp)
    }

    /// `publication` in `form`, made after `refused` (its previous form) was refused for good with `refusal`.
    func record(of publication: Publication, as form: RecordForm, refused: KafkaRecord, refusal: KafkaError) -> KafkaRecord {
        switch (publication, form) {
        case (.outcome(let outcome), .asBuilt), (.outcome(let outcome), .withoutTraceHeaders):
            return KafkaRecord(topic: outcomesTopic, key: refused.key, value: refused.value, headers: cloudEvents.headers(of: outcome))
        case (.outcome(let outcome), .deadLetter):
            return deadLetter(of: outcome, value: refused.value, refusal: refusal)
        case (_, .deadLetterWithoutValue):
            // Always made from the dead letter without trace headers (the step before it).
            return withoutValue(refused)
        case (.deadLetter, _):
            return records(for: [publication])[0]
        }
    }

    /// An outcome that could not be published, as a dead letter: its key, its JSON (cut as a job's would be), and why.
    private func deadLetter(of outcome: Outcome, value: [UInt8], refusal: KafkaError) -> KafkaRecord {
        let origin = "outcome/" + CloudEventHeaders.id(of: outcome)
        var headers = cloudEvents.headers(ofDeadLetterFrom: origin, at: currentTimeMilliseconds())
        headers += [
            KafkaHeader(Self.reasonHeader, "the outcome could not be published to \(outcomesTopic): \(refusal.message)"),
            KafkaHeader(Self.codeHeader, refusal.isRecordTooLarge ? Self.outcomeTooLargeCode : Self.outcomeRefusedCode),
            KafkaHeader(Self.sourceHeader, origin),
        ]
        if value.count > Self.maximumDeadLetterBytes { headers.append(KafkaHeader(Self.truncatedHeader, String(value.count))) }
        let key = Array(outcome.bindingId.utf8)
        if key.count > Self.maximumDeadLetterKeyBytes { headers.append(KafkaHeader(Self.keyTruncatedHeader, String(key.count))) }
        return KafkaRecord(
            topic: deadLetterTopic, key: Array(key.prefix(Self.maximumDeadLetterKeyBytes)),
            value: Array(value.prefix(Self.maximumDeadLetterBytes)),
            headers: headers)
    }

    /// A dead letter without its value: its (cut) key and headers, `push-dlq-truncated` giving the original size (the
    /// one it has already when its value was cut).
    private func withoutValue(_ deadLetter: KafkaRecord) -> KafkaRecord {
        var headers = deadLetter.headers
        if !headers.contains(where: { $0.name == Self.truncatedHeader }) {
            headers.append(KafkaHeader(Self.truncatedHeader, String(deadLetter.value.count)))
        }
        return KafkaRecord(topic: deadLetter.topic, key: deadLetter.key, value: [], headers: headers)
    }

    /// Counts and logs a record given up (its ids, never its bytes).
    private func dropped(_ publication: Publication, error: KafkaError) {
        switch publication {
        case .outcome(let outcome):
            dropCounters.outcomes.increment()
            logger.error(
                "an outcome was refused for good in every form and is given up; its job ends",
                metadata: ["jobId": "\(outcome.jobId)", "bindingId": "\(outcome.bindingId)", "error": "\(error)"])
        case .deadLetter(let rejection, _, _, let source):
            dropCounters.deadLetters.increment()
            logger.error(
                "a dead letter was refused for good in every form and is given up; its job ends",
                metadata: ["source": "\(source)", "code": "\(rejection.code.rawValue)", "error": "\(error)"])
        }
    }
}

import Logging
import PushCore
import PushKafka

/// Where and as what outcomes (key = bindingId) and dead letters (original key and bytes, reason in headers) are
/// published, each with its CloudEvents headers (`CloudEventHeaders`): the records and the producer they go
/// through. `PendingOutcomes` sends them and waits for the broker's acknowledgement; a record refused for good is sent
/// in ever smaller forms (`RecordForm`), then given up.
public struct OutcomePublisher: Sendable {
    public static let reasonHeader = "push-dlq-reason"
    public static let codeHeader = "push-dlq-code"
    public static let sourceHeader = "push-dlq-source"
    /// Set when the dead letter carries only the first bytes of the job (or key): the original size.
    public static let truncatedHeader = "push-dlq-truncated"
    public static let keyTruncatedHeader = "push-dlq-key-truncated"
    /// A dead letter keeps at most this much of the job: twice the largest accepted job, and well
    /// below the producer's `message.max.bytes` (1,000,000 by default). A larger one could never be
    /// acknowledged, and publishing "until acknowledged" would hold its partition forever.
    public static let maximumDeadLetterBytes = 262_144
    public static let maximumDeadLetterKeyBytes = 4096

    let producer: any MessageSink
    let outcomesTopic: String
    let deadLetterTopic: String
    let metrics: PipelineMetrics
    let logger: Logger
    let cloudEvents: CloudEventHeaders
    let dropCounters = PublishDropCounters()

    /// - Parameter consumerGroup: names the deployment in the CloudEvents `ce_source` of everything published.
    public init(
        producer: any MessageSink, outcomesTopic: String, deadLetterTopic: String, consumerGroup: String, metrics: PipelineMetrics,
        logger: Logger
    ) {
        self.producer = producer
        cloudEvents = CloudEventHeaders(consumerGroup: consumerGroup)
        self.outcomesTopic = outcomesTopic
        self.deadLetterTopic = deadLetterTopic
        self.metrics = metrics
        self.logger = logger
    }

    /// Learns the outcome and dead-letter topics' partitions before the first job (blocks up to
    /// a few seconds); returns the topics that could not be looked up.
    func prepareTopics() -> [String] {
        producer.prepare(topics: [outcomesTopic, deadLetterTopic], timeout: .seconds(5))
    }

    /// - Parameters:
    ///   - encoded: outcomes among `publications` whose JSON is made already, in the same order.
    ///   - traceHeaders: `traceparent`/`tracestate` of the span that publishes them, when traced: on every record.
    func records(for publications: [Publication], encoded: [EncodedOutcome] = [], traceHeaders: [KafkaHeader] = []) -> [KafkaRecord] {
        var next = encoded.startIndex
        return publications.map { publication in
            switch publication {
            case .outcome(let outcome):
                let json: [UInt8]
                if next < encoded.endIndex, encoded[next].outcome == outcome {
                    json = encoded[next].json
                    next += 1
                } else {
                    json = outcome.encoded()
                }
                return KafkaRecord(
                    topic: outcomesTopic, key: Array(outcome.bindingId.utf8), value: json,
                    headers: cloudEvents.headers(of: outcome, adding: traceHeaders))
            case .deadLetter(let rejection, let value, let key, let source):
                var headers = cloudEvents.headers(ofDeadLetterFrom: source, at: currentTimeMilliseconds())
                headers += [
                    KafkaHeader(Self.reasonHeader, rejection.message),
                    KafkaHeader(Self.codeHeader, rejection.code.rawValue),
                    KafkaHeader(Self.sourceHeader, source),
                ]
                if value.count > Self.maximumDeadLetterBytes { headers.append(KafkaHeader(Self.truncatedHeader, String(value.count))) }
                if let key, key.count > Self.maximumDeadLetterKeyBytes {
                    headers.append(KafkaHeader(Self.keyTruncatedHeader, String(key.count)))
                }
                headers += traceHeaders
                return KafkaRecord(
                    topic: deadLetterTopic, key: key.map { Array($0.prefix(Self.maximumDeadLetterKeyBytes)) },
                    value: Array(value.prefix(Self.maximumDeadLetterBytes)), headers: headers)
            }
        }
    }

    /// Counts and logs a send that failed for a transient reason; the sender tries again (`PendingOutcomes`).
    func failed(_ error: any Error) {
        metrics.publishFailures.increment()
        logger.error("publishing outcomes failed; retrying", metadata: ["error": "\(error)"])
    }
}

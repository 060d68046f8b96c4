import Logging
import PushCore
import PushKafka

/// Publishes outcomes (key = bindingId) and dead letters (original key and bytes,
/// reason in headers), waiting for the broker's acknowledgement.
public struct OutcomePublisher: Sendable {
    public static let reasonHeader = "push-dlq-reason"
    public static let codeHeader = "push-dlq-code"
    public static let sourceHeader = "push-dlq-source"

    let producer: KafkaProducer
    let outcomesTopic: String
    let deadLetterTopic: String
    let metrics: PipelineMetrics
    let logger: Logger

    public init(producer: KafkaProducer, outcomesTopic: String, deadLetterTopic: String, metrics: PipelineMetrics, logger: Logger) {
        self.producer = producer
        self.outcomesTopic = outcomesTopic
        self.deadLetterTopic = deadLetterTopic
        self.metrics = metrics
        self.logger = logger
    }

    /// Learns the outcome and dead-letter topics' partitions before the first job (blocks up to
    /// a few seconds); returns the topics that could not be looked up.
    func prepareTopics() -> [String] {
        producer.prepare(topics: [outcomesTopic, deadLetterTopic])
    }

    func records(for publications: [Publication]) -> [KafkaRecord] {
        publications.map { publication in
            switch publication {
            case .outcome(let outcome):
                return KafkaRecord(topic: outcomesTopic, key: Array(outcome.bindingId.utf8), value: outcome.encoded())
            case .deadLetter(let rejection, let value, let key, let source):
                return KafkaRecord(topic: deadLetterTopic, key: key, value: value, headers: [
                    KafkaHeader(Self.reasonHeader, rejection.message),
                    KafkaHeader(Self.codeHeader, rejection.code.rawValue),
                    KafkaHeader(Self.sourceHeader, source),
                ])
            }
        }
    }

    /// Publishes until acknowledged; gives up only when the task is cancelled (a stop).
    func publish(_ publications: [Publication]) async -> Bool {
        let records = records(for: publications)
        var backoff = Duration.milliseconds(100)
        while true {
            do {
                try await producer.send(records)
                return true
            } catch {
                metrics.publishFailures.increment()
                logger.error("publishing outcomes failed; retrying", metadata: ["error": "\(error)"])
                if Task.isCancelled { return false }
                try? await Task.sleep(for: backoff)
                backoff = min(backoff * 2, .seconds(5))
            }
        }
    }
}

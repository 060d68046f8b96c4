import PushCore
import PushKafka

/// How processed jobs become Kafka records: outcomes keyed by bindingId, dead letters
/// with the original key and bytes and the reason in headers.
public struct OutcomeRecords: Sendable {
    public static let reasonHeader = "push-dlq-reason"
    public static let codeHeader = "push-dlq-code"
    public static let sourceHeader = "push-dlq-source"

    let outcomesTopic: String
    let deadLetterTopic: String

    public init(outcomesTopic: String, deadLetterTopic: String) {
        self.outcomesTopic = outcomesTopic
        self.deadLetterTopic = deadLetterTopic
    }

    func records(for processed: ProcessedJob, from message: KafkaMessage) -> [KafkaRecord] {
        switch processed {
        case .deadLetter(let rejection):
            return [KafkaRecord(topic: deadLetterTopic, key: message.key, value: message.value, headers: [
                KafkaHeader(Self.reasonHeader, rejection.message),
                KafkaHeader(Self.codeHeader, rejection.code.rawValue),
                KafkaHeader(Self.sourceHeader, "\(message.topicPartition.topic)/\(message.topicPartition.partition)@\(message.offset)"),
            ])]
        case .outcomes(_, let outcomes):
            return outcomes.map { KafkaRecord(topic: outcomesTopic, key: Array($0.bindingId.utf8), value: $0.encoded()) }
        case .abandoned:
            return []
        }
    }
}

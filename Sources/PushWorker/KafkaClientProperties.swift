import PushKafka

/// The librdkafka properties of the worker's Kafka clients, in one place for `run` and `check-config`: each client's
/// defaults with every `PUSH_RDKAFKA_*` property over them (security settings included), less what only the other
/// client takes (librdkafka warns of, or refuses, a property meant for the other side).
extension WorkerConfiguration {
    /// The normal lane's consumer (the urgent lane's differs only by its group).
    public var consumerProperties: [String: String] {
        KafkaConsumer.defaultProperties(bootstrapServers: brokers, groupId: groupId)
            .merging(rdkafkaProperties) { $1 }
            .filter { !Self.producerOnlyProperties.contains($0.key) }
    }

    /// The outcome producer.
    public var producerProperties: [String: String] {
        KafkaProducer.defaultProperties(bootstrapServers: brokers)
            .merging(rdkafkaProperties) { $1 }
            .filter { !Self.consumerOnlyProperties.contains($0.key) }
    }

    /// Producer properties, with their aliases (`delivery.timeout.ms` is `message.timeout.ms`, `request.required.acks`
    /// is `acks`, `queue.buffering.max.ms` is `linger.ms`, `compression.codec` is `compression.type`).
    static let producerOnlyProperties: Set<String> = [
        "enable.idempotence", "acks", "request.required.acks", "linger.ms", "queue.buffering.max.ms", "compression.type",
        "compression.codec", "message.timeout.ms", "delivery.timeout.ms", "batch.size", "queue.buffering.max.messages",
    ]
    static let consumerOnlyProperties: Set<String> = [
        "auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms",
        "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
        "partition.assignment.strategy", "enable.partition.eof",
        "group.instance.id", "fetch.min.bytes", "fetch.wait.max.ms",
        "queued.max.messages.kbytes",
    ]
}

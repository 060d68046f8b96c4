import Logging
import PushCore
import PushKafka

/// One lane's member of its consumer group, as the pipeline drives it from the lane's own thread.
/// `poll` hands out what has arrived and, inside the call, reports assignments and revocations to
/// the handler the source was made with. Stored offsets (the next one to consume) are committed by
/// the source: at the latest when its partitions are revoked or it closes.
public protocol MessageSource: Sendable {
    /// Up to `maximum` messages: waits up to `timeoutMilliseconds` for the first, then takes only what has arrived.
    func poll(maximum: Int, timeoutMilliseconds: Int32) -> [KafkaMessage]
    func storeOffset(_ offset: Int64, for topicPartition: TopicPartition)
    /// Stops fetching from every assigned partition (while the shared store is down); polling still serves the group.
    func pauseAll()
    func resumeAll()
    /// Stops fetching from these partitions (a key whose jobs back up); the next poll starts after the last
    /// message handed out, so nothing is skipped or handed out twice.
    func pause(_ partitions: [TopicPartition])
    func resume(_ partitions: [TopicPartition])
    /// Commits the stored offsets and leaves the group.
    func close()
}

/// Makes the source of each lane: Kafka consumers in the worker (`KafkaMessageSources`), an in-memory log in tests.
public protocol MessageSourceFactory: Sendable {
    /// - Parameter rebalance: called on the polling thread, inside `poll`, when partitions are assigned or about to be revoked.
    func makeSource(lane: Lane, topic: String, rebalance: @escaping @Sendable (RebalanceEvent) -> Void) throws -> any MessageSource
}

/// Where outcomes and dead letters go.
public protocol MessageSink: Sendable {
    /// Calls `completion` once every record is acknowledged or refused, with each record that was not (by its index).
    func produce(_ records: [KafkaRecord], reporting completion: @escaping @Sendable (Result<Void, UndeliveredRecords>) -> Void)
    /// Learns the topics' partitions before the first send (blocks up to `timeout`); returns the topics it could not.
    func prepare(topics: [String], timeout: Duration) -> [String]
}

extension KafkaConsumer: MessageSource {}
extension KafkaProducer: MessageSink {}

/// The lanes' Kafka consumers: the normal lane with `consumerProperties`, the urgent lane in a group of its own.
public struct KafkaMessageSources: MessageSourceFactory {
    let consumerProperties: [String: String]
    let metrics: PipelineMetrics
    let logger: Logger

    /// The urgent lane's consumer group: the normal group's id with this suffix, so a rebalance
    /// of one lane (which waits for its revoked jobs) never stalls the other.
    public static let urgentGroupSuffix = ".urgent"
    /// The urgent consumer's `fetch.wait.max.ms` ceiling.
    public static let urgentFetchWaitMilliseconds = 10

    /// - Parameter consumerProperties: complete librdkafka consumer properties of the normal lane (see `KafkaConsumer.defaultProperties`).
    public init(consumerProperties: [String: String], metrics: PipelineMetrics, logger: Logger) {
        self.consumerProperties = consumerProperties
        self.metrics = metrics
        self.logger = logger
    }

    /// The librdkafka properties of `lane`'s consumer.
    func properties(of lane: Lane) -> [String: String] {
        guard lane == .urgent else { return consumerProperties }
        var properties = consumerProperties
        properties["group.id"] = (properties["group.id"] ?? "push-worker") + Self.urgentGroupSuffix
        // A broker answers a fetch as soon as data arrives, but one that holds an empty fetch for its
        // whole wait (librdkafka's mock cluster) would add up to this much to every call.
        properties["fetch.wait.max.ms"] =
            properties["fetch.wait.max.ms"].flatMap(Int.init).map { String(min($0, Self.urgentFetchWaitMilliseconds)) }
            ?? String(Self.urgentFetchWaitMilliseconds)
        return properties
    }

    public func makeSource(lane: Lane, topic: String, rebalance: @escaping @Sendable (RebalanceEvent) -> Void) throws -> any MessageSource {
        let metrics = metrics
        return try KafkaConsumer(
            properties: properties(of: lane), topics: [topic], logger: logger,
            statistics: { json in
                for (topic, partition, lag) in ConsumerLag.parse(json) {
                    metrics.consumerLag(lane, topic: topic, partition: partition, messages: lag)
                }
            }, rebalance: rebalance)
    }
}

import CRdKafka
import Logging
import PushKafka

/// librdkafka's mock cluster: a Kafka-protocol broker on loopback TCP that any client
/// (this process, kcat, confluent-kafka) can use. For the demo, tests and benchmarks.
public final class MockKafkaCluster: @unchecked Sendable {
    private let owner: OpaquePointer
    private let cluster: OpaquePointer
    public let bootstrapServers: String

    private let context: RDKafkaContext

    public init(brokers: Int = 1, logger: Logger = Logger(label: "kafka-mock")) throws(KafkaError) {
        context = RDKafkaContext(logger: logger)
        let conf = try RDKafkaConfig.make(["log_level": "4"])
        RDKafkaConfig.attach(context, to: conf)
        owner = try RDKafkaConfig.newHandle(RD_KAFKA_PRODUCER, conf: conf)
        guard let cluster = rd_kafka_mock_cluster_new(owner, Int32(brokers)) else {
            rd_kafka_destroy(owner)
            throw KafkaError(code: -1, message: "could not start the mock cluster")
        }
        self.cluster = cluster
        bootstrapServers = String(cString: rd_kafka_mock_cluster_bootstraps(cluster))
    }

    public func createTopic(_ name: String, partitions: Int) throws(KafkaError) {
        let error = rd_kafka_mock_topic_create(cluster, name, Int32(partitions), 1)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(error) }
    }

    /// Makes the next `count` Produce requests fail with a retriable NOT_ENOUGH_REPLICAS.
    public func failNextProduceRequests(_ count: Int) {
        let errors = [rd_kafka_resp_err_t](repeating: RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, count: count)
        errors.withUnsafeBufferPointer {
            rd_kafka_mock_push_request_errors_array(cluster, 0 /* Produce */, $0.count, $0.baseAddress)
        }
    }

    /// Takes broker `id` down (disconnects its clients, refuses new connections) or back up; -1 = every broker.
    public func setBroker(_ id: Int32, up: Bool) {
        _ = up ? rd_kafka_mock_broker_set_up(cluster, id) : rd_kafka_mock_broker_set_down(cluster, id)
    }

    /// Makes the next `count` requests of Kafka protocol API `apiKey` (0 Produce, 1 Fetch,
    /// 8 OffsetCommit, 12 Heartbeat, …) fail with error code `error` (negative codes are
    /// librdkafka's local ones: -195 `_TRANSPORT` disconnects the client).
    public func failNextRequests(apiKey: Int16, count: Int, error: Int32) {
        let errors = [rd_kafka_resp_err_t](repeating: rd_kafka_resp_err_t(rawValue: error), count: count)
        errors.withUnsafeBufferPointer {
            rd_kafka_mock_push_request_errors_array(cluster, apiKey, $0.count, $0.baseAddress)
        }
    }

    /// Forgets the queued errors of Kafka protocol API `apiKey`: its next requests succeed.
    public func clearRequestErrors(apiKey: Int16) {
        rd_kafka_mock_clear_request_errors(cluster, apiKey)
    }

    /// Delays every answer of broker `id` (-1 = every broker) by `milliseconds`.
    public func setRoundTripTime(broker id: Int32, milliseconds: Int) {
        _ = rd_kafka_mock_broker_set_rtt(cluster, id, Int32(milliseconds))
    }

    deinit {
        rd_kafka_mock_cluster_destroy(cluster)
        rd_kafka_destroy(owner)
    }
}

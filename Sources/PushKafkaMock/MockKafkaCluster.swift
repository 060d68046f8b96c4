import CRdKafka
import Foundation
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
        disableNagleOnListeners()
    }

    /// The TCP ports the brokers listen on.
    public var brokerPorts: Set<UInt16> {
        Set(bootstrapServers.split(separator: ",").compactMap { $0.split(separator: ":").last.flatMap { UInt16($0) } })
    }

    /// The mock broker leaves Nagle's algorithm on for the connections it accepts (librdkafka sets
    /// TCP_NODELAY only on connections it opens, in `rd_kafka_transport_post_connect_setup`), so a
    /// small answer waits for the client's acknowledgement of the one before: at 2 000 outcomes/s
    /// that made the outcomes' publishing p90 13.3 ms instead of 2.8. A Kafka broker turns Nagle off on the
    /// connections it accepts. On Linux an accepted socket inherits TCP_NODELAY from its listening
    /// socket, so it is set on the brokers' listening sockets, found among this process's descriptors.
    private func disableNagleOnListeners() {
        let ports = brokerPorts
        guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return }
        for descriptor in descriptors.compactMap({ Int32($0) }) {
            guard Self.isListening(descriptor), let port = Self.localPort(of: descriptor), ports.contains(port) else { continue }
            var one: Int32 = 1
            _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    static func isListening(_ descriptor: Int32) -> Bool {
        var listening: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(descriptor, SOL_SOCKET, SO_ACCEPTCONN, &listening, &length) == 0 && listening == 1
    }

    /// The local port of an IPv4 socket; nil for anything else.
    static func localPort(of descriptor: Int32) -> UInt16? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        guard named == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
        return UInt16(bigEndian: address.sin_port)
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
        // Up again means a new listening socket.
        if up { disableNagleOnListeners() }
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

import CRdKafka
import Foundation
import Logging
import PushCore

/// What the cluster says about itself: its brokers and the partition count of each topic that exists.
public struct KafkaClusterMetadata: Sendable, Equatable {
    /// `host:port` of each broker.
    public var brokers: [String]
    /// The topics that exist, with their partition counts.
    public var partitions: [String: Int]
    /// Topics the cluster listed with an error instead of partitions (e.g. authorization), with the error.
    public var topicErrors: [String: KafkaError]
}

/// `push-worker check-config`'s one question to Kafka at a time, through a client configured exactly as the worker's
/// consumer (its security settings included), that joins no group and creates nothing: the cluster's metadata (all
/// topics: asking for one by name can auto-create it), and a group's committed offsets. Each call blocks a thread of
/// its own until the broker answers or the timeout passes.
public final class KafkaClusterProbe: Sendable {
    private let rdkafka: RDKafkaHandle
    private let lastError = Locked<KafkaError?>(nil)

    /// - Parameter properties: complete consumer properties (`group.id` names the group whose offsets are read).
    public init(properties: [String: String], logger: Logger) throws(KafkaError) {
        let lastError = lastError
        let context = RDKafkaContext(logger: logger, errors: { error in lastError.withLock { $0 = error } })
        let conf = try RDKafkaConfig.make(properties)
        RDKafkaConfig.attach(context, to: conf)
        rd_kafka_conf_set_error_cb(conf) { _, error, reason, opaque in
            guard let opaque else { return }
            let context = Unmanaged<RDKafkaContext>.fromOpaque(opaque).takeUnretainedValue()
            let code = rd_kafka_resp_err_t(rawValue: error)
            context.errors?(KafkaError(code: error, message: reason.map { String(cString: $0) } ?? KafkaError(code).message))
        }
        rdkafka = RDKafkaHandle(try RDKafkaConfig.newHandle(RD_KAFKA_CONSUMER, conf: conf), context: context)
    }

    /// The metadata of every topic (`rd_kafka_metadata` with all topics, which creates none).
    public func metadata(timeout: Duration) async throws(KafkaError) -> KafkaClusterMetadata {
        try await onThread { [rdkafka] () throws(KafkaError) -> KafkaClusterMetadata in
            var metadata: UnsafePointer<rd_kafka_metadata_t>?
            let error = rd_kafka_metadata(rdkafka.pointer, 1, nil, &metadata, Self.milliseconds(timeout))
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else { throw self.explained(KafkaError(error)) }
            defer { rd_kafka_metadata_destroy(metadata) }
            let brokers = (0..<Int(metadata.pointee.broker_cnt)).map { index in
                let broker = metadata.pointee.brokers[index]
                return "\(String(cString: broker.host)):\(broker.port)"
            }
            var partitions: [String: Int] = [:]
            var topicErrors: [String: KafkaError] = [:]
            for index in 0..<Int(metadata.pointee.topic_cnt) {
                let topic = metadata.pointee.topics[index]
                let name = String(cString: topic.topic)
                if topic.err == RD_KAFKA_RESP_ERR_NO_ERROR {
                    partitions[name] = Int(topic.partition_cnt)
                } else {
                    topicErrors[name] = KafkaError(topic.err)
                }
            }
            return KafkaClusterMetadata(brokers: brokers, partitions: partitions, topicErrors: topicErrors)
        }
    }

    /// The group's committed offset of each partition: nil where the group has committed none yet. A refusal of the
    /// whole request (the group's coordinator unreachable, the group not authorized) or of a partition is thrown.
    public func committedOffsets(_ partitions: [TopicPartition], timeout: Duration) async throws(KafkaError) -> [TopicPartition: Int64?] {
        guard !partitions.isEmpty else { return [:] }
        return try await onThread { [rdkafka] () throws(KafkaError) -> [TopicPartition: Int64?] in
            let list = RDKafkaTopicPartitionList.make(partitions.map { ($0, Int64(RD_KAFKA_OFFSET_INVALID)) })
            defer { rd_kafka_topic_partition_list_destroy(list) }
            let error = rd_kafka_committed(rdkafka.pointer, list, Self.milliseconds(timeout))
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else { throw self.explained(KafkaError(error)) }
            var offsets: [TopicPartition: Int64?] = [:]
            for index in 0..<Int(list.pointee.cnt) {
                let element = list.pointee.elems[index]
                guard element.err == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(element.err) }
                let topicPartition = TopicPartition(topic: String(cString: element.topic), partition: element.partition)
                offsets[topicPartition] = element.offset >= 0 ? element.offset : nil
            }
            return offsets
        }
    }

    /// `error` with what the client reported meanwhile (a refused SASL login shows as a timeout of the request).
    private func explained(_ error: KafkaError) -> KafkaError {
        rd_kafka_poll(rdkafka.pointer, 0)
        guard let reported = lastError.withLock({ $0 }), reported != error else { return error }
        return KafkaError(code: reported.code, message: "\(error.message); the client reported: \(reported.message)")
    }

    private static func milliseconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        return Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    /// Runs a blocking librdkafka call off the cooperative pool.
    private func onThread<Value: Sendable>(_ work: @escaping @Sendable () throws(KafkaError) -> Value) async throws(KafkaError) -> Value {
        let result: Result<Value, KafkaError> = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                do throws(KafkaError) { continuation.resume(returning: .success(try work())) } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }
}

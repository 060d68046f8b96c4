import CRdKafka

/// Builds an `rd_kafka_conf_t` from properties; ownership passes to `rd_kafka_new`.
enum RDKafkaConfig {
    static func make(_ properties: [String: String]) throws(KafkaError) -> OpaquePointer {
        let conf = rd_kafka_conf_new()!
        var problems: [String] = []
        for (name, value) in properties.sorted(by: { $0.key < $1.key }) {
            var buffer = [CChar](repeating: 0, count: 512)
            if rd_kafka_conf_set(conf, name, value, &buffer, buffer.count) != RD_KAFKA_CONF_OK {
                problems.append("\(name): \(String(cBuffer: buffer))")
            }
        }
        guard problems.isEmpty else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(code: -1, message: problems.joined(separator: "; "))
        }
        return conf
    }

    static func newHandle(_ type: rd_kafka_type_t, conf: OpaquePointer) throws(KafkaError) -> OpaquePointer {
        var buffer = [CChar](repeating: 0, count: 512)
        guard let handle = rd_kafka_new(type, conf, &buffer, buffer.count) else {
            rd_kafka_conf_destroy(conf)
            throw KafkaError(code: -1, message: String(cBuffer: buffer))
        }
        return handle
    }
}

/// Builds and reads `rd_kafka_topic_partition_list_t`.
enum RDKafkaTopicPartitionList {
    static func make(_ entries: [(TopicPartition, Int64)]) -> UnsafeMutablePointer<rd_kafka_topic_partition_list_t> {
        let list = rd_kafka_topic_partition_list_new(Int32(entries.count))!
        for (topicPartition, offset) in entries {
            let element = rd_kafka_topic_partition_list_add(list, topicPartition.topic, topicPartition.partition)!
            element.pointee.offset = offset
        }
        return list
    }

    static func read(_ list: UnsafePointer<rd_kafka_topic_partition_list_t>) -> [TopicPartition] {
        (0..<Int(list.pointee.cnt)).map { index in
            let element = list.pointee.elems[index]
            return TopicPartition(topic: String(cString: element.topic), partition: element.partition)
        }
    }
}

/// Owns an `rd_kafka_t`; destroyed when the last user lets go.
final class RDKafkaHandle: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    deinit { rd_kafka_destroy(pointer) }
}

extension String {
    /// A string from a NUL-terminated C buffer.
    init(cBuffer buffer: [CChar]) {
        self.init(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

import CRdKafka
import Logging

/// Builds an `rd_kafka_conf_t` from properties; ownership passes to `rd_kafka_new`.
/// `package`: the mock cluster (PushKafkaMock) builds its owner handle the same way.
package enum RDKafkaConfig {
    package static func make(_ properties: [String: String]) throws(KafkaError) -> OpaquePointer {
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

    /// Routes librdkafka's own log lines through `context.logger` and makes `context` the handle's opaque.
    package static func attach(_ context: RDKafkaContext, to conf: OpaquePointer) {
        rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(context).toOpaque())
        rd_kafka_conf_set_log_cb(conf) { handle, level, facility, message in
            guard let handle, let opaque = rd_kafka_opaque(handle), let message else { return }
            let context = Unmanaged<RDKafkaContext>.fromOpaque(opaque).takeUnretainedValue()
            let logLevel: Logger.Level =
                switch level {
                case 0...2: .critical
                case 3: .error
                case 4: .warning
                case 5: .notice
                case 6: .info
                default: .debug
                }
            context.logger.log(
                level: logLevel, "librdkafka: \(String(cString: message))",
                metadata: ["facility": "\(facility.map { String(cString: $0) } ?? "-")"])
        }
    }

    /// Hands librdkafka's periodic statistics JSON to `context.statistics`.
    static func attachStatistics(to conf: OpaquePointer) {
        rd_kafka_conf_set_stats_cb(conf) { handle, json, length, opaque in
            if let opaque, let json {
                let context = Unmanaged<RDKafkaContext>.fromOpaque(opaque).takeUnretainedValue()
                context.statistics?(Array(UnsafeRawBufferPointer(start: json, count: length)))
            }
            return 0
        }
    }

    package static func newHandle(_ type: rd_kafka_type_t, conf: OpaquePointer) throws(KafkaError) -> OpaquePointer {
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

/// Owns an `rd_kafka_t`; destroyed when the last user lets go (a poll thread may be last).
/// It also keeps the handle's callback context alive: librdkafka's threads log through it
/// until `rd_kafka_destroy` returns, so the context must not go before the handle.
final class RDKafkaHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    private let context: RDKafkaContext

    init(_ pointer: OpaquePointer, context: RDKafkaContext) {
        self.pointer = pointer
        self.context = context
    }

    deinit { rd_kafka_destroy(pointer) }
}

extension String {
    /// A string from a NUL-terminated C buffer.
    init(cBuffer buffer: [CChar]) {
        self.init(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// What librdkafka's C callbacks reach through the handle's opaque pointer. Kept alive
/// by the Swift object that owns the handle.
package final class RDKafkaContext: Sendable {
    let logger: Logger
    let rebalance: (@Sendable (RebalanceEvent) -> Void)?
    let statistics: (@Sendable ([UInt8]) -> Void)?
    /// librdkafka's client-level errors (a refused SASL login, brokers down), from `rd_kafka_poll`.
    let errors: (@Sendable (KafkaError) -> Void)?

    package init(
        logger: Logger, rebalance: (@Sendable (RebalanceEvent) -> Void)? = nil,
        statistics: (@Sendable ([UInt8]) -> Void)? = nil, errors: (@Sendable (KafkaError) -> Void)? = nil
    ) {
        self.logger = logger
        self.rebalance = rebalance
        self.statistics = statistics
        self.errors = errors
    }
}

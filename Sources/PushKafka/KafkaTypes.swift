import CRdKafka

public struct KafkaError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: Int32
    public let message: String

    public init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }

    package init(_ error: rd_kafka_resp_err_t) {
        code = error.rawValue
        message = String(cString: rd_kafka_err2str(error))
    }

    public var description: String { "Kafka error \(code): \(message)" }
}

public struct KafkaHeader: Sendable, Equatable {
    public var name: String
    public var value: [UInt8]

    public init(_ name: String, _ value: [UInt8]) {
        self.name = name
        self.value = value
    }

    public init(_ name: String, _ value: String) {
        self.init(name, Array(value.utf8))
    }
}

/// A message to produce.
public struct KafkaRecord: Sendable {
    public var topic: String
    public var key: [UInt8]?
    public var value: [UInt8]
    public var headers: [KafkaHeader]

    public init(topic: String, key: [UInt8]?, value: [UInt8], headers: [KafkaHeader] = []) {
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
    }
}

public struct TopicPartition: Sendable, Hashable, CustomStringConvertible {
    public var topic: String
    public var partition: Int32

    public init(topic: String, partition: Int32) {
        self.topic = topic
        self.partition = partition
    }

    public var description: String { "\(topic)[\(partition)]" }
}

/// A consumed message, copied out of librdkafka's buffers.
public struct KafkaMessage: Sendable {
    public var topicPartition: TopicPartition
    public var offset: Int64
    public var key: [UInt8]?
    public var value: [UInt8]
    /// Milliseconds since the epoch, if the broker or producer set one.
    public var timestamp: Int64?
    public var headers: [KafkaHeader]

    public init(
        topicPartition: TopicPartition, offset: Int64, key: [UInt8]?, value: [UInt8], timestamp: Int64?,
        headers: [KafkaHeader] = []
    ) {
        self.topicPartition = topicPartition
        self.offset = offset
        self.key = key
        self.value = value
        self.timestamp = timestamp
        self.headers = headers
    }
}

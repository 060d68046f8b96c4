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

    /// The one rule for what a refused record can hope for: an error that refuses the record itself (its size,
    /// its contents), locally when it is produced or by the broker, refuses it again however often it is sent, so
    /// it is final for that record; any other error (a broker down, a timeout, a full queue) is transient and the
    /// record is sent again as it is.
    public var refusesRecordForGood: Bool {
        switch code {
        // `INVALID_MSG` is Kafka's CORRUPT_MESSAGE.
        case RD_KAFKA_RESP_ERR_INVALID_MSG.rawValue, RD_KAFKA_RESP_ERR_INVALID_MSG_SIZE.rawValue,
            RD_KAFKA_RESP_ERR_INVALID_RECORD.rawValue:
            true
        default: isRecordTooLarge
        }
    }

    /// librdkafka's refusal of a record over `message.max.bytes` (a sink that models it uses this one).
    public static let messageSizeTooLarge = KafkaError(RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE)

    /// Whether the record (or the batch it went in) is larger than the producer or the broker takes.
    public var isRecordTooLarge: Bool {
        code == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE.rawValue || code == RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE.rawValue
    }
}

/// The records of a batch that were not acknowledged, each by its index in the batch, with why.
public struct UndeliveredRecords: Error, Sendable, CustomStringConvertible {
    public struct Failure: Sendable, Equatable {
        public let index: Int
        public let error: KafkaError

        public init(index: Int, error: KafkaError) {
            self.index = index
            self.error = error
        }
    }

    /// In the order they were reported; never empty.
    public let failures: [Failure]

    public init(_ failures: [Failure]) {
        precondition(!failures.isEmpty, "no undelivered record")
        self.failures = failures
    }

    public var first: KafkaError { failures[0].error }

    public var description: String { "\(failures.count) record(s) not acknowledged, first: \(first)" }
}

public struct KafkaHeader: Sendable, Equatable {
    public var name: String
    /// The value, as a slice: the headers of one record may share one buffer (`init(_:bytes:)`).
    public var bytes: ArraySlice<UInt8>

    public var value: [UInt8] {
        get { Array(bytes) }
        set { bytes = newValue[...] }
    }

    public init(_ name: String, _ value: [UInt8]) {
        self.init(name, bytes: value[...])
    }

    public init(_ name: String, bytes: ArraySlice<UInt8>) {
        self.name = name
        self.bytes = bytes
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

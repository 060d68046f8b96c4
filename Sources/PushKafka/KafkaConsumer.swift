import CRdKafka
import Logging
import Synchronization

public enum RebalanceEvent: Sendable {
    case assigned([TopicPartition])
    /// Called before the partitions are taken away: finish or abandon their work and
    /// store their offsets now; the consumer commits right after.
    case revoking([TopicPartition])
}

/// A librdkafka group consumer with manual offset storage: an offset is stored only
/// when the caller says the work before it is done; stored offsets are committed
/// periodically, on revocation and on close. `poll`, `pause`, `resume` and the
/// rebalance handler run on the caller's consumer thread.
public final class KafkaConsumer: Sendable {
    private let rdkafka: RDKafkaHandle
    private var handle: OpaquePointer { rdkafka.pointer }
    private let context: RDKafkaContext
    private let logger: Logger
    private let closed = Atomic<Bool>(false)

    public static func defaultProperties(bootstrapServers: String, groupId: String) -> [String: String] {
        [
            "bootstrap.servers": bootstrapServers,
            "group.id": groupId,
            "enable.auto.offset.store": "false",
            "enable.auto.commit": "true",
            "auto.commit.interval.ms": "1000",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": "false",
            // Prefetch at most 16 MiB per lane (librdkafka's default is 64 MiB). Once the prefetch queue is
            // full, librdkafka before 2.2 waits a whole second before it fetches again (confluentinc/librdkafka
            // issue 2879; 2.2 made that wait `fetch.queue.backoff.ms`), so the queue must hold more than a second
            // of work or the worker idles: 4 MiB, about 8 700 jobs of 480 bytes, held the worker at ~10 000 jobs/s
            // (docs/performance.md).
            "queued.max.messages.kbytes": "16384",
        ]
    }

    /// - Parameters:
    ///   - properties: complete librdkafka properties (see `defaultProperties`).
    ///   - rebalance: called on the polling thread when partitions are assigned or about to be revoked.
    ///   - statistics: called with librdkafka's statistics JSON every `statistics.interval.ms` (when set).
    public init(
        properties: [String: String], topics: [String], logger: Logger,
        statistics: (@Sendable ([UInt8]) -> Void)? = nil,
        rebalance: @escaping @Sendable (RebalanceEvent) -> Void
    ) throws(KafkaError) {
        precondition(properties["enable.auto.offset.store"] == "false", "offsets are stored by the pipeline only")
        self.logger = logger
        context = RDKafkaContext(logger: logger, rebalance: rebalance, statistics: statistics)
        var properties = properties
        if statistics != nil, properties["statistics.interval.ms"] == nil { properties["statistics.interval.ms"] = "5000" }
        let conf = try RDKafkaConfig.make(properties)
        RDKafkaConfig.attach(context, to: conf)
        if statistics != nil { RDKafkaConfig.attachStatistics(to: conf) }
        rd_kafka_conf_set_rebalance_cb(conf) { handle, error, partitions, opaque in
            guard let handle, let partitions, let opaque else { return }
            let context = Unmanaged<RDKafkaContext>.fromOpaque(opaque).takeUnretainedValue()
            let topicPartitions = RDKafkaTopicPartitionList.read(partitions)
            let cooperative = String(cString: rd_kafka_rebalance_protocol(handle)) == "COOPERATIVE"
            switch error {
            case RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS:
                context.logger.info("partitions assigned", metadata: ["partitions": "\(topicPartitions)"])
                if cooperative {
                    if let failure = rd_kafka_incremental_assign(handle, partitions) { rd_kafka_error_destroy(failure) }
                } else {
                    rd_kafka_assign(handle, partitions)
                }
                context.rebalance?(.assigned(topicPartitions))
            default:
                context.logger.info(
                    "partitions revoked", metadata: ["partitions": "\(topicPartitions)", "reason": "\(KafkaError(error).message)"])
                context.rebalance?(.revoking(topicPartitions))
                let commitError = rd_kafka_commit(handle, nil, 0)
                if commitError != RD_KAFKA_RESP_ERR_NO_ERROR, commitError != RD_KAFKA_RESP_ERR__NO_OFFSET {
                    context.logger.warning("commit on revocation failed", metadata: ["error": "\(KafkaError(commitError))"])
                }
                if cooperative {
                    if let failure = rd_kafka_incremental_unassign(handle, partitions) { rd_kafka_error_destroy(failure) }
                } else {
                    rd_kafka_assign(handle, nil)
                }
            }
        }
        rdkafka = RDKafkaHandle(try RDKafkaConfig.newHandle(RD_KAFKA_CONSUMER, conf: conf), context: context)
        rd_kafka_poll_set_consumer(rdkafka.pointer)
        let subscription = RDKafkaTopicPartitionList.make(topics.map { (TopicPartition(topic: $0, partition: RD_KAFKA_PARTITION_UA), 0) })
        defer { rd_kafka_topic_partition_list_destroy(subscription) }
        let error = rd_kafka_subscribe(handle, subscription)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else { throw KafkaError(error) }
    }

    /// The next message, or nil when none arrived within `timeout` milliseconds.
    /// Serves rebalance callbacks. Consumer errors are logged, not thrown: librdkafka recovers from them.
    public func poll(timeoutMilliseconds: Int32) -> KafkaMessage? {
        guard let message = rd_kafka_consumer_poll(handle, timeoutMilliseconds) else { return nil }
        defer { rd_kafka_message_destroy(message) }
        let raw = message.pointee
        guard raw.err == RD_KAFKA_RESP_ERR_NO_ERROR else {
            logger.warning("consumer error", metadata: ["error": "\(KafkaError(raw.err))"])
            return nil
        }
        let topic = String(cString: rd_kafka_topic_name(raw.rkt))
        let value = raw.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: raw.len)) } ?? []
        let key = raw.key.map { Array(UnsafeRawBufferPointer(start: $0, count: raw.key_len)) }
        var timestampType = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE
        let timestamp = rd_kafka_message_timestamp(message, &timestampType)
        return KafkaMessage(
            topicPartition: TopicPartition(topic: topic, partition: raw.partition), offset: raw.offset,
            key: key, value: value,
            timestamp: timestampType == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? nil : timestamp,
            headers: readHeaders(message))
    }

    /// Up to `maximum` messages: waits up to `timeout` milliseconds for the first, then takes
    /// only what librdkafka has already fetched. Serves rebalance callbacks.
    public func poll(maximum: Int, timeoutMilliseconds: Int32) -> [KafkaMessage] {
        guard maximum > 0, let first = poll(timeoutMilliseconds: timeoutMilliseconds) else { return [] }
        var messages = [first]
        while messages.count < maximum, let next = poll(timeoutMilliseconds: 0) { messages.append(next) }
        return messages
    }

    private func readHeaders(_ message: UnsafeMutablePointer<rd_kafka_message_t>) -> [KafkaHeader] {
        var headers: OpaquePointer?
        guard rd_kafka_message_headers(message, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR, let headers else { return [] }
        var result: [KafkaHeader] = []
        var index = 0
        while true {
            var name: UnsafePointer<CChar>?
            var value: UnsafeRawPointer?
            var size = 0
            guard rd_kafka_header_get_all(headers, index, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR, let name else { break }
            result.append(KafkaHeader(String(cString: name), value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []))
            index += 1
        }
        return result
    }

    /// Stores `offset` (the next one to consume) for `topicPartition`; committed by the next commit.
    public func storeOffset(_ offset: Int64, for topicPartition: TopicPartition) {
        let list = RDKafkaTopicPartitionList.make([(topicPartition, offset)])
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let error = rd_kafka_offsets_store(handle, list)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.debug(
                "offset not stored", metadata: ["partition": "\(topicPartition)", "offset": "\(offset)", "error": "\(KafkaError(error))"])
        }
    }

    /// Stops fetching from every assigned partition (back-pressure); polling continues to serve the group.
    public func pauseAll() { withAssignment { rd_kafka_pause_partitions(handle, $0) } }

    public func resumeAll() { withAssignment { rd_kafka_resume_partitions(handle, $0) } }

    /// Stops fetching from `partitions`; librdkafka drops what it prefetched of them and fetches again
    /// from the position after the last message polled when they resume.
    public func pause(_ partitions: [TopicPartition]) {
        withList(partitions) { rd_kafka_pause_partitions(handle, $0) }
    }

    public func resume(_ partitions: [TopicPartition]) {
        withList(partitions) { rd_kafka_resume_partitions(handle, $0) }
    }

    private func withList(
        _ partitions: [TopicPartition], _ body: (UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> rd_kafka_resp_err_t
    ) {
        guard !partitions.isEmpty else { return }
        let list = RDKafkaTopicPartitionList.make(partitions.map { ($0, Int64(RD_KAFKA_OFFSET_INVALID)) })
        defer { rd_kafka_topic_partition_list_destroy(list) }
        let error = body(list)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("pause/resume of partitions failed", metadata: ["partitions": "\(partitions)", "error": "\(KafkaError(error))"])
        }
    }

    private func withAssignment(_ body: (UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> rd_kafka_resp_err_t) {
        var assignment: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        guard rd_kafka_assignment(handle, &assignment) == RD_KAFKA_RESP_ERR_NO_ERROR, let assignment else { return }
        defer { rd_kafka_topic_partition_list_destroy(assignment) }
        let error = body(assignment)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("pause/resume failed", metadata: ["error": "\(KafkaError(error))"])
        }
    }

    /// Commits the stored offsets now.
    public func commit() {
        let error = rd_kafka_commit(handle, nil, 0)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR, error != RD_KAFKA_RESP_ERR__NO_OFFSET {
            logger.warning("commit failed", metadata: ["error": "\(KafkaError(error))"])
        }
    }

    /// Leaves the group (revoking, hence committing, through the rebalance handler). Call from the polling thread.
    public func close() {
        guard !closed.exchange(true, ordering: .relaxed) else { return }
        let error = rd_kafka_consumer_close(handle)
        if error != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("consumer close failed", metadata: ["error": "\(KafkaError(error))"])
        }
    }

    deinit { close() }
}

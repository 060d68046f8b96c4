import CRdKafka
import Foundation
import Logging
import PushCore
import Synchronization

/// Counts the delivery reports of one batch of records and notes each record that failed (by its index); after the
/// last, resumes the task waiting for them or calls the batch's completion.
final class DeliveryBatch: Sendable {
    typealias Completion = @Sendable (Result<Void, UndeliveredRecords>) -> Void

    private struct State {
        var remaining: Int
        /// Stays empty, with nothing allocated, while every record is acknowledged.
        var failures: [UndeliveredRecords.Failure] = []
        var continuation: CheckedContinuation<Result<Void, UndeliveredRecords>, Never>?

        var result: Result<Void, UndeliveredRecords> { failures.isEmpty ? .success(()) : .failure(UndeliveredRecords(failures)) }
    }

    private let state: Mutex<State>
    /// Called with the result on the thread of the last report, instead of resuming a waiting task.
    private let completion: Completion?
    /// One slot per record, each holding this batch's address: a record's opaque is its slot, from which its delivery
    /// report learns both the batch and the record's index, with one allocation per batch. Written here, then only read.
    private nonisolated(unsafe) let slots: UnsafeMutablePointer<UnsafeMutableRawPointer>

    init(count: Int, completion: Completion? = nil) {
        state = Mutex(State(remaining: count))
        self.completion = completion
        slots = .allocate(capacity: max(count, 1))
        slots.initialize(repeating: Unmanaged.passUnretained(self).toOpaque(), count: max(count, 1))
    }

    deinit { slots.deallocate() }

    /// The opaque of the record at `index`, which keeps the batch alive until `takeRetained` (its report).
    func retainedOpaque(of index: Int) -> UnsafeMutableRawPointer {
        _ = Unmanaged.passRetained(self)
        return UnsafeMutableRawPointer(slots + index)
    }

    /// The batch and record index of an opaque from `retainedOpaque`, releasing what it retained.
    static func takeRetained(_ opaque: UnsafeMutableRawPointer) -> (batch: DeliveryBatch, index: Int) {
        let slot = opaque.assumingMemoryBound(to: UnsafeMutableRawPointer.self)
        let batch = Unmanaged<DeliveryBatch>.fromOpaque(slot.pointee).takeRetainedValue()
        return (batch, slot - batch.slots)
    }

    func reported(_ error: KafkaError?, index: Int) {
        let finished = state.withLock {
            state -> (Result<Void, UndeliveredRecords>, CheckedContinuation<Result<Void, UndeliveredRecords>, Never>?)? in
            if let error { state.failures.append(UndeliveredRecords.Failure(index: index, error: error)) }
            state.remaining -= 1
            guard state.remaining == 0 else { return nil }
            defer { state.continuation = nil }
            return (state.result, state.continuation)
        }
        guard let (result, continuation) = finished else { return }
        if let completion { completion(result) } else { continuation?.resume(returning: result) }
    }

    /// Waits for the last report; returns at once if every record was reported already.
    func outcome() async -> Result<Void, UndeliveredRecords> {
        await withCheckedContinuation { continuation in
            let finished = state.withLock { state -> Result<Void, UndeliveredRecords>? in
                guard state.remaining == 0 else {
                    state.continuation = continuation
                    return nil
                }
                return state.result
            }
            if let finished { continuation.resume(returning: finished) }
        }
    }
}

private final class PollerState: Sendable {
    let stopping = Atomic<Bool>(false)
    let finished = DispatchSemaphore(value: 0)
}

/// An idempotent librdkafka producer (`acks=all`). `send` returns once the broker
/// acknowledged every record of the batch.
public final class KafkaProducer: Sendable {
    private let rdkafka: RDKafkaHandle
    private var handle: OpaquePointer { rdkafka.pointer }
    private let logger: Logger
    private let poller = PollerState()
    private let context: RDKafkaContext

    public static func defaultProperties(bootstrapServers: String) -> [String: String] {
        [
            "bootstrap.servers": bootstrapServers,
            "enable.idempotence": "true",
            "acks": "all",
            "linger.ms": "2",
        ]
    }

    /// - Parameters:
    ///   - properties: complete librdkafka properties (see `defaultProperties`).
    ///   - statistics: called with librdkafka's statistics JSON every `statistics.interval.ms` (5 s unless set).
    public init(
        properties: [String: String], logger: Logger,
        statistics: (@Sendable ([UInt8]) -> Void)? = nil
    ) throws(KafkaError) {
        self.logger = logger
        context = RDKafkaContext(logger: logger, statistics: statistics)
        var properties = properties
        if statistics != nil, properties["statistics.interval.ms"] == nil { properties["statistics.interval.ms"] = "5000" }
        let conf = try RDKafkaConfig.make(properties)
        RDKafkaConfig.attach(context, to: conf)
        if statistics != nil { RDKafkaConfig.attachStatistics(to: conf) }
        rd_kafka_conf_set_dr_msg_cb(conf) { _, message, _ in
            guard let message, let opaque = message.pointee._private else { return }
            let (batch, index) = DeliveryBatch.takeRetained(opaque)
            let error = message.pointee.err
            batch.reported(error == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(error), index: index)
        }
        rdkafka = RDKafkaHandle(try RDKafkaConfig.newHandle(RD_KAFKA_PRODUCER, conf: conf), context: context)
        NamedThread.start("kafka-produce") { [rdkafka, poller] in
            while !poller.stopping.load(ordering: .relaxed) { rd_kafka_poll(rdkafka.pointer, 100) }
            poller.finished.signal()
        }
    }

    /// Produces `records` and waits for every delivery report. While librdkafka's local queue is
    /// full, a record waits for room without holding a thread.
    public func send(_ records: [KafkaRecord]) async throws(KafkaError) {
        guard !records.isEmpty else { return }
        let batch = DeliveryBatch(count: records.count)
        await enqueueWaitingForRoom(records[...], batch: batch)
        try await batch.outcome().mapError(\.first).get()
    }

    /// `produce(_:reporting:)` answered with the first failure only.
    public func send(_ records: [KafkaRecord], completion: @escaping @Sendable (Result<Void, KafkaError>) -> Void) {
        produce(records, reporting: { completion($0.mapError(\.first)) })
    }

    /// Produces `records` without a task waiting: `completion` runs once every record is reported (with each record
    /// that was not acknowledged, and why), on the producer's polling thread (or on the caller's, for a record
    /// librdkafka refused). Only while librdkafka's local queue is full does a task wait for room, for the records left.
    public func produce(_ records: [KafkaRecord], reporting completion: @escaping @Sendable (Result<Void, UndeliveredRecords>) -> Void) {
        guard !records.isEmpty else { return completion(.success(())) }
        let batch = DeliveryBatch(count: records.count, completion: completion)
        for index in records.indices where !enqueue(records[index], at: index, for: batch) {
            let rest = records[index...]
            Task { await self.enqueueWaitingForRoom(rest, batch: batch) }
            return
        }
    }

    /// Hands each record to librdkafka, pausing while its local queue is full.
    private func enqueueWaitingForRoom(_ records: ArraySlice<KafkaRecord>, batch: DeliveryBatch) async {
        for index in records.indices {
            while !enqueue(records[index], at: index, for: batch) { await Self.pause(milliseconds: 5) }
        }
    }

    /// Hands the record at `index` of `batch` to librdkafka; false when its local queue is full (and the producer is
    /// not stopping), so the record waits. A record refused for any other reason (one over `message.max.bytes`) is
    /// reported to the batch.
    private func enqueue(_ record: KafkaRecord, at index: Int, for batch: DeliveryBatch) -> Bool {
        let opaque = batch.retainedOpaque(of: index)
        guard let refusal = enqueue(record, opaque: opaque) else { return true }
        _ = DeliveryBatch.takeRetained(opaque)
        if refusal == RD_KAFKA_RESP_ERR__QUEUE_FULL, !poller.stopping.load(ordering: .relaxed) { return false }
        batch.reported(KafkaError(refusal), index: index)
        return true
    }

    /// A queue of its own, so that the end of a pause never waits for a thread of the global queue,
    /// which blocking work elsewhere may hold.
    private static let pauses = DispatchQueue(label: "kafka-producer-pauses")

    /// Sleeps without ending early when the task is cancelled: a cancelled task's records are still produced.
    private static func pause(milliseconds: Int) async {
        await withCheckedContinuation { continuation in
            pauses.asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { continuation.resume() }
        }
    }

    /// Hands one record to librdkafka; nil when it took it, else why not.
    private func enqueue(_ record: KafkaRecord, opaque: UnsafeMutableRawPointer) -> rd_kafka_resp_err_t? {
        // librdkafka copies the topic, key, value (RD_KAFKA_MSG_F_COPY) and headers before
        // `rd_kafka_produceva` returns: every pointer below is lent for the call alone.
        let error = record.topic.withCString { topic in
            record.value.withUnsafeBytes { value in
                withOptionalBytes(record.key) { key in
                    withHeaders(record.headers) { headers in
                        withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: 5 + headers.count) { values in
                            var vu = rd_kafka_vu_t()
                            vu.vtype = RD_KAFKA_VTYPE_TOPIC
                            vu.u.cstr = topic
                            values.initializeElement(at: 0, to: vu)
                            vu = rd_kafka_vu_t()
                            vu.vtype = RD_KAFKA_VTYPE_VALUE
                            vu.u.mem.ptr = UnsafeMutableRawPointer(mutating: value.baseAddress)
                            vu.u.mem.size = value.count
                            values.initializeElement(at: 1, to: vu)
                            vu = rd_kafka_vu_t()
                            vu.vtype = RD_KAFKA_VTYPE_MSGFLAGS
                            vu.u.i = RD_KAFKA_MSG_F_COPY
                            values.initializeElement(at: 2, to: vu)
                            vu = rd_kafka_vu_t()
                            vu.vtype = RD_KAFKA_VTYPE_OPAQUE
                            vu.u.ptr = opaque
                            values.initializeElement(at: 3, to: vu)
                            var count = 4
                            if let key {
                                vu = rd_kafka_vu_t()
                                vu.vtype = RD_KAFKA_VTYPE_KEY
                                vu.u.mem.ptr = UnsafeMutableRawPointer(mutating: key.baseAddress)
                                vu.u.mem.size = key.count
                                values.initializeElement(at: count, to: vu)
                                count += 1
                            }
                            for header in headers {
                                values.initializeElement(at: count, to: header)
                                count += 1
                            }
                            return rd_kafka_produceva(handle, values.baseAddress, count)
                        }
                    }
                }
            }
        }
        guard let error else { return nil }
        defer { rd_kafka_error_destroy(error) }
        return rd_kafka_error_code(error)
    }

    /// Looks up `topics`' partitions and leaders now. Without it the first record to a topic
    /// waits for librdkafka's metadata refresh (about a second), and so does every record
    /// produced to that topic meanwhile. Returns the topics it could not look up.
    @discardableResult
    public func prepare(topics: [String], timeout: Duration = .seconds(5)) -> [String] {
        topics.filter { name in
            guard let topic = rd_kafka_topic_new(handle, name, nil) else { return true }
            defer { rd_kafka_topic_destroy(topic) }
            var metadata: UnsafePointer<rd_kafka_metadata_t>?
            let error = rd_kafka_metadata(handle, 0, topic, &metadata, Int32(timeout.components.seconds * 1000))
            if let metadata { rd_kafka_metadata_destroy(metadata) }
            return error != RD_KAFKA_RESP_ERR_NO_ERROR
        }
    }

    /// Waits up to `timeout` for queued records to be delivered, then stops polling.
    public func close(timeout: Duration = .seconds(10)) {
        guard !poller.stopping.exchange(true, ordering: .relaxed) else { return }
        poller.finished.wait()
        let remaining = rd_kafka_flush(handle, Int32(timeout.components.seconds * 1000))
        if remaining != RD_KAFKA_RESP_ERR_NO_ERROR {
            logger.warning("outcome producer closed with undelivered records", metadata: ["queued": "\(rd_kafka_outq_len(handle))"])
            rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
            rd_kafka_poll(handle, 0)
        }
    }

    deinit { close(timeout: .zero) }
}

/// The key's bytes (nil for no key), lent to `body`. An empty key still has an address.
private func withOptionalBytes<Result>(_ bytes: [UInt8]?, _ body: (UnsafeRawBufferPointer?) -> Result) -> Result {
    guard let bytes else { return body(nil) }
    if bytes.isEmpty { return withUnsafeBytes(of: UInt8(0)) { body(UnsafeRawBufferPointer(rebasing: $0[0..<0])) } }
    return bytes.withUnsafeBytes { body($0) }
}

/// The headers as `rd_kafka_vu_t` values, their names (each NUL-terminated) and values laid out in one temporary
/// buffer lent to `body` alone: librdkafka copies them before `rd_kafka_produceva` returns. Every outcome carries
/// its CloudEvents headers, so nothing here touches the heap for a record of ordinary size.
private func withHeaders<Result>(_ headers: [KafkaHeader], _ body: (UnsafeBufferPointer<rd_kafka_vu_t>) -> Result) -> Result {
    guard !headers.isEmpty else { return body(UnsafeBufferPointer(start: nil, count: 0)) }
    var size = 0
    for header in headers { size += header.name.utf8.count + 1 + header.bytes.count }
    return withUnsafeTemporaryAllocation(byteCount: size, alignment: 1) { buffer in
        withUnsafeTemporaryAllocation(of: rd_kafka_vu_t.self, capacity: headers.count) { values in
            var offset = 0
            for (index, header) in headers.enumerated() {
                let name = buffer.baseAddress! + offset
                for byte in header.name.utf8 {
                    buffer[offset] = byte
                    offset += 1
                }
                buffer[offset] = 0
                offset += 1
                let value = buffer.baseAddress! + offset
                header.bytes.withUnsafeBytes { bytes in
                    if let source = bytes.baseAddress { value.copyMemory(from: source, byteCount: bytes.count) }
                }
                offset += header.bytes.count
                var vu = rd_kafka_vu_t()
                vu.vtype = RD_KAFKA_VTYPE_HEADER
                vu.u.header.name = UnsafePointer(name.assumingMemoryBound(to: CChar.self))
                vu.u.header.val = UnsafeRawPointer(value)
                vu.u.header.size = header.bytes.count
                values.initializeElement(at: index, to: vu)
            }
            return body(UnsafeBufferPointer(values))
        }
    }
}

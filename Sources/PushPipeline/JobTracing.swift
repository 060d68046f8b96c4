import PushCore
import PushKafka
import Tracing

/// A consumed job's spans, when trace export is on (the worker's `OTEL_*` variables; off, the pipeline holds no
/// `JobTracing` and does none of this). The job continues the trace of its message's `traceparent`/`tracestate`
/// headers (W3C Trace Context, through the tracer's propagators):
///
/// - a CONSUMER span for the job, from its start until its outcomes are acknowledged, with OpenTelemetry's messaging
///   attributes for Kafka (topic, partition, offset, key, consumer group);
/// - a CLIENT span for the store's round trip before the sends (`prepare`);
/// - a CLIENT span per provider request, with the provider, the app (its metric label, never a job's own string),
///   the HTTP status and the outcome it led to;
/// - a PRODUCER span for the publication of its outcomes, whose context the outcome records carry on in their own
///   `traceparent`/`tracestate` headers.
///
/// A retry from the shared queue carries no headers, so it is not traced.
public struct JobTracing: Sendable {
    public let tracer: any Tracer
    let consumerGroup: String

    public init(tracer: any Tracer, consumerGroup: String) {
        self.tracer = tracer
        self.consumerGroup = consumerGroup
    }

    /// At most this much of a message key becomes the `messaging.kafka.message.key` attribute.
    static let maximumKeyAttributeBytes = 256

    /// The job's CONSUMER span, a child of the context its message's headers carry (a new trace without them).
    func consumerSpan(of message: KafkaMessage) -> any Span {
        var parent = ServiceContext.topLevel
        tracer.extract(message.headers, into: &parent, using: KafkaHeadersExtractor())
        let span = tracer.startSpan("process \(message.topicPartition.topic)", context: parent, ofKind: .consumer)
        // A span the sampler left out records nothing: its attributes would be made for nothing.
        guard span.isRecording else { return span }
        span.attributes["messaging.system"] = "kafka"
        span.attributes["messaging.operation.type"] = "process"
        span.attributes["messaging.destination.name"] = message.topicPartition.topic
        span.attributes["messaging.destination.partition.id"] = String(message.topicPartition.partition)
        span.attributes["messaging.kafka.offset"] = Int(message.offset)
        span.attributes["messaging.consumer.group.name"] = consumerGroup
        if let key = message.key {
            span.attributes["messaging.kafka.message.key"] = String(decoding: key.prefix(Self.maximumKeyAttributeBytes), as: UTF8.self)
        }
        return span
    }

    /// A CLIENT span for the store's round trip, a child of the current job's span.
    func storeSpan(_ operation: String) -> any Span {
        let span = tracer.startSpan("redis \(operation)", context: ServiceContext.current ?? .topLevel, ofKind: .client)
        guard span.isRecording else { return span }
        span.attributes["db.system.name"] = "redis"
        span.attributes["db.operation.name"] = operation
        return span
    }

    /// A CLIENT span for one provider request, a child of the current job's span.
    func requestSpan(provider: ProviderID, app: String, attempt: Int) -> any Span {
        let span = tracer.startSpan("POST \(provider.rawValue)", context: ServiceContext.current ?? .topLevel, ofKind: .client)
        guard span.isRecording else { return span }
        span.attributes["http.request.method"] = "POST"
        span.attributes["push.provider"] = provider.rawValue
        span.attributes["push.app"] = app
        span.attributes["push.attempt"] = attempt
        return span
    }

    /// Ends a request's span with what the provider answered.
    static func end(_ span: any Span, with result: DeliveryResult) {
        guard span.isRecording else { return span.end() }
        let status: String
        let httpStatus: Int?
        switch result {
        case .delivered(_, let code, _):
            (status, httpStatus) = ("delivered", code)
        case .rejected(_, let code, _, _):
            (status, httpStatus) = ("rejected", code)
        case .failed(_, let code, _, _):
            (status, httpStatus) = ("failed", code)
        case .retryable(_, let code, _):
            (status, httpStatus) = ("retryable", code)
        }
        span.attributes["push.outcome.status"] = status
        if let httpStatus { span.attributes["http.response.status_code"] = httpStatus }
        if status != "delivered" { span.setStatus(SpanStatus(code: .error)) }
        span.end()
    }

    /// The PRODUCER span of a job's outcomes, a child of its CONSUMER span.
    func producerSpan(topic: String, records: Int, parent: ServiceContext) -> any Span {
        let span = tracer.startSpan("send \(topic)", context: parent, ofKind: .producer)
        guard span.isRecording else { return span }
        span.attributes["messaging.system"] = "kafka"
        span.attributes["messaging.operation.type"] = "send"
        span.attributes["messaging.destination.name"] = topic
        span.attributes["messaging.batch.message_count"] = records
        return span
    }

    /// The headers that carry `context` on (`traceparent`, and `tracestate` when there is one).
    func headers(carrying context: ServiceContext) -> [KafkaHeader] {
        var headers: [KafkaHeader] = []
        tracer.inject(context, into: &headers, using: KafkaHeadersInjector())
        return headers
    }
}

/// Reads a propagation field from a consumed message's headers (the last header of that name, compared without case).
/// A producer's trace headers go on into every outcome and dead letter of the job, so only what W3C Trace Context
/// (Level 1, §3.2 and §3.3) lets a vendor pass on is read: a `traceparent` that parses, and a `tracestate` of at most
/// 512 bytes and 32 list-members; anything else is dropped as if absent.
struct KafkaHeadersExtractor: Extractor {
    static let maximumTraceStateBytes = 512
    static let maximumTraceStateMembers = 32

    func extract(key: String, from carrier: [KafkaHeader]) -> String? {
        guard let header = carrier.last(where: { $0.name.lowercased() == key.lowercased() }) else { return nil }
        switch key.lowercased() {
        case "traceparent": return Self.isTraceParent(header.value) ? String(decoding: header.value, as: UTF8.self) : nil
        case "tracestate": return Self.isPassableTraceState(header.value) ? String(decoding: header.value, as: UTF8.self) : nil
        default: return String(decoding: header.value, as: UTF8.self)
        }
    }

    /// `version-traceid-parentid-flags` in lower-case hex (§3.2.2): version not `ff`, ids not all zero; a later
    /// version may add fields after a `-` (§3.2.4).
    static func isTraceParent(_ value: [UInt8]) -> Bool {
        guard
            value.count == 55 || (value.count > 55 && value.count <= 256 && value[55] == UInt8(ascii: "-") && value[0...1] != [0x30, 0x30])
        else { return false }
        func isHex(_ range: Range<Int>) -> Bool {
            value[range].allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        }
        func isZero(_ range: Range<Int>) -> Bool { value[range].allSatisfy { $0 == 0x30 } }
        let dash = UInt8(ascii: "-")
        guard value[2] == dash, value[35] == dash, value[52] == dash else { return false }
        guard isHex(0..<2), isHex(3..<35), isHex(36..<52), isHex(53..<55) else { return false }
        return value[0...1] != [0x66, 0x66] && !isZero(3..<35) && !isZero(36..<52)
    }

    /// At most 512 bytes (§3.3.1.1's size every vendor must pass on) and 32 list-members (§3.3.1.1), printable ASCII.
    static func isPassableTraceState(_ value: [UInt8]) -> Bool {
        guard value.count <= maximumTraceStateBytes, value.allSatisfy({ (0x20...0x7E).contains($0) }) else { return false }
        let members = value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: true)
            .filter { !$0.allSatisfy { $0 == 0x20 || $0 == 0x09 } }
        return members.count <= maximumTraceStateMembers
    }
}

struct KafkaHeadersInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout [KafkaHeader]) {
        carrier.append(KafkaHeader(key, value))
    }
}

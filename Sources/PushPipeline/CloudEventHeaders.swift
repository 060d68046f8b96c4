import PushCore
import PushKafka

/// The CloudEvents 1.0 attributes of what the worker publishes, in the Kafka protocol binding's binary content
/// mode: the value stays as it is (an outcome's contract v1 JSON, a dead letter's original bytes) and each
/// attribute is a header named `ce_<attribute>`, its value UTF-8 text; `datacontenttype` is the `content-type`
/// header (CloudEvents Kafka protocol binding, section 3.2; core specification, section 3.1).
///
/// - `ce_id` is made from the outcome itself, so an outcome published again (a job redelivered after a crash reads
///   its record back) carries the same id, and consumers may take equal `ce_source` and `ce_id` for a duplicate, as
///   the core specification allows.
/// - `ce_source` names the worker deployment by its consumer group, the same in every replica.
/// - `ce_time` is when the outcome was reached (its `at`); for a dead letter, when it was dead-lettered.
struct CloudEventHeaders: Sendable {
    static let specVersion = "1.0"
    static let contentType = "application/json"
    static let outcomeTypePrefix = "io.push-worker.outcome."
    static let deadLetterType = "io.push-worker.dead-letter"

    /// `ce_source`: `/push-worker/<group>`, the group percent-encoded outside RFC 3986's unreserved characters.
    let source: String
    /// The headers every outcome carries alike, and each status's `ce_type`, made once: an outcome's headers then
    /// cost only its id, time and subject.
    private let common: [KafkaHeader]
    private let outcomeTypes: [Outcome.Status: KafkaHeader]
    private let deadLetterCommon: [KafkaHeader]

    init(consumerGroup: String) {
        source = "/push-worker/" + PercentEncoding.allButUnreserved(consumerGroup)
        let specVersion = KafkaHeader("ce_specversion", Self.specVersion)
        let sourceHeader = KafkaHeader("ce_source", source)
        common = [specVersion, sourceHeader, KafkaHeader("content-type", Self.contentType)]
        outcomeTypes = Dictionary(uniqueKeysWithValues: Outcome.Status.allCases.map { ($0, KafkaHeader("ce_type", Self.type(of: $0))) })
        deadLetterCommon = [specVersion, sourceHeader, KafkaHeader("ce_type", Self.deadLetterType)]
    }

    /// The `ce_type` of an outcome of this status.
    static func type(of status: Outcome.Status) -> String { outcomeTypePrefix + status.rawValue }

    /// `ce_id` of an outcome: its status and attempts, then the job id with its length before it and the binding
    /// id, so that no two outcomes share it whatever characters the ids hold.
    static func id(of outcome: Outcome) -> String { String(decoding: idBytes(of: outcome), as: UTF8.self) }

    /// `id(of:)` as the header carries it.
    static func idBytes(of outcome: Outcome) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(idLength(of: outcome))
        appendID(of: outcome, to: &bytes)
        return bytes
    }

    private static func idLength(of outcome: Outcome) -> Int {
        outcome.status.rawValue.utf8.count + outcome.jobId.utf8.count + outcome.bindingId.utf8.count + 24
    }

    private static func appendID(of outcome: Outcome, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: outcome.status.rawValue.utf8)
        bytes.append(UInt8(ascii: "/"))
        bytes.append(contentsOf: String(outcome.attempts).utf8)
        bytes.append(UInt8(ascii: "/"))
        bytes.append(contentsOf: String(outcome.jobId.utf8.count).utf8)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(contentsOf: outcome.jobId.utf8)
        bytes.append(UInt8(ascii: "/"))
        bytes.append(contentsOf: outcome.bindingId.utf8)
    }

    /// `extra`: headers to add after these (a traced job's `traceparent`), in the same array. The values of the id,
    /// time and subject are written in one buffer, which their headers share.
    func headers(of outcome: Outcome, adding extra: [KafkaHeader] = []) -> [KafkaHeader] {
        var values: [UInt8] = []
        values.reserveCapacity(Self.idLength(of: outcome) + Self.timeLength + outcome.bindingId.utf8.count)
        Self.appendID(of: outcome, to: &values)
        let idEnd = values.count
        UTCTimestamp.appendISO8601(millisecondsSinceEpoch: outcome.at, to: &values)
        let timeEnd = values.count
        values.append(contentsOf: outcome.bindingId.utf8)
        var headers: [KafkaHeader] = []
        headers.reserveCapacity(common.count + 4 + extra.count)
        headers += common
        headers.append(outcomeTypes[outcome.status]!)
        headers.append(KafkaHeader("ce_id", bytes: values[..<idEnd]))
        headers.append(KafkaHeader("ce_time", bytes: values[idEnd..<timeEnd]))
        headers.append(KafkaHeader("ce_subject", bytes: values[timeEnd...]))
        headers += extra
        return headers
    }

    /// `2026-11-24T02:39:36.820Z`: 24 bytes for any year of four digits.
    private static let timeLength = 24

    /// A dead letter's: its id is where the job came from (`<topic>/<partition>@<offset>`, or the retry entry),
    /// unique per message; no subject (the job named no usable binding) and no content type (its bytes may not
    /// be JSON at all).
    func headers(ofDeadLetterFrom origin: String, at milliseconds: Int64) -> [KafkaHeader] {
        deadLetterCommon + [
            KafkaHeader("ce_id", "dead-letter/" + origin),
            KafkaHeader("ce_time", UTCTimestamp.iso8601Bytes(millisecondsSinceEpoch: milliseconds)),
        ]
    }
}

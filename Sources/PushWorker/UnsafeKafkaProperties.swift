import Foundation

/// librdkafka properties that turn off the authentication of the brokers, make librdkafka
/// load or run code from outside the image, or break the delivery contract (an offset is
/// committed only after the job's outcomes were acknowledged by every in-sync replica; a
/// crash or rebalance redelivers at most the uncommitted window; no job is skipped).
/// Start-up refuses each of them, one line per property, unless `PUSH_RDKAFKA_ALLOW_UNSAFE=true`.
/// Names (aliases included), values and meanings are those of librdkafka's CONFIGURATION.md
/// (2.0.2 and later); values are matched the way librdkafka parses them (booleans
/// `false`/`f`/`0`, enums case-insensitively). `max.in.flight` above 5 is not listed:
/// librdkafka itself refuses it while `enable.idempotence` is on.
struct UnsafeKafkaProperty: Sendable {
    let name: String
    /// Whether this value of the property is the unsafe one; nil: any value is.
    let unsafeValue: (@Sendable (String) -> Bool)?
    /// What the setting does, as the problem line states it after the setting.
    let consequence: String

    static let all: [UnsafeKafkaProperty] = [
        UnsafeKafkaProperty(
            name: "enable.ssl.certificate.verification", unsafeValue: isFalse,
            consequence: "turns off verification of the brokers' TLS certificates"),
        UnsafeKafkaProperty(
            name: "ssl.endpoint.identification.algorithm", unsafeValue: { $0.normalized == "none" },
            consequence: "turns off the check that a broker's certificate names its host"),
        UnsafeKafkaProperty(
            name: "enable.sasl.oauthbearer.unsecure.jwt", unsafeValue: isTrue,
            consequence: "authenticates with librdkafka's unsigned test tokens (for development only)"),
        UnsafeKafkaProperty(
            name: "plugin.library.paths", unsafeValue: nil,
            consequence: "loads shared libraries into the worker"),
        UnsafeKafkaProperty(
            name: "ssl.engine.location", unsafeValue: nil,
            consequence: "loads an OpenSSL engine library into the worker"),
        UnsafeKafkaProperty(
            name: "sasl.kerberos.kinit.cmd", unsafeValue: nil,
            consequence: "runs a shell command of its own"),
        UnsafeKafkaProperty(name: "acks", unsafeValue: isNotAll, consequence: acknowledgedBeforeReplicated),
        UnsafeKafkaProperty(name: "request.required.acks", unsafeValue: isNotAll, consequence: acknowledgedBeforeReplicated),
        UnsafeKafkaProperty(
            name: "enable.idempotence", unsafeValue: isFalse,
            consequence:
                "turns off the idempotent outcome producer: a batch resent after a broker error can be written twice or out of order, and acks=all is no longer enforced"
        ),
        UnsafeKafkaProperty(name: "message.timeout.ms", unsafeValue: isZero, consequence: outcomesNeverTimeOut),
        UnsafeKafkaProperty(name: "delivery.timeout.ms", unsafeValue: isZero, consequence: outcomesNeverTimeOut),
        UnsafeKafkaProperty(name: "enable.auto.commit", unsafeValue: isFalse, consequence: commitsOnlyOnRebalance),
        UnsafeKafkaProperty(name: "auto.commit.interval.ms", unsafeValue: isZero, consequence: commitsOnlyOnRebalance),
        UnsafeKafkaProperty(
            name: "auto.commit.interval.ms", unsafeValue: { $0.integer.map { $0 > longestCommitInterval } ?? false },
            consequence:
                "commits finished jobs' offsets less often than every \(longestCommitInterval) ms: after a crash the jobs finished since the last commit come back once the session times out (45 s by default), and past 10 s they can come back after the shortest PUSH_IDEMPOTENCY_TTL_S (60 s) has forgotten them, so they are sent twice"
        ),
        UnsafeKafkaProperty(
            name: "auto.offset.reset", unsafeValue: { ["largest", "latest", "end"].contains($0.normalized) },
            consequence:
                "starts a new consumer group, or a partition whose committed offset the topic no longer holds, at its end: the jobs before it are never delivered"
        ),
        UnsafeKafkaProperty(
            name: "isolation.level", unsafeValue: { $0.normalized == "read_uncommitted" },
            consequence: "reads jobs of transactions their producer aborted: pushes it took back are sent"),
    ]

    private static let acknowledgedBeforeReplicated =
        "lets a broker acknowledge an outcome before every in-sync replica has it: the job's offset can be committed for an outcome a broker failure then loses"
    /// `message.timeout.ms` (alias `delivery.timeout.ms`) 0 is "no limit": librdkafka holds an outcome it cannot produce
    /// until a broker takes it and never calls the delivery report, which is how the worker learns of a failed publish.
    private static let outcomesNeverTimeOut =
        "waits for the brokers' acknowledgement of an outcome without end: its delivery report never comes, so a publish that cannot complete is never reported, logged or retried, and its job's offset is never committed"
    /// The slowest periodic commit allowed. The worker commits offsets through librdkafka's periodic commit (every
    /// 1 s, `KafkaConsumer.defaultProperties`; explicitly only on a rebalance or shutdown), so the interval is how much
    /// finished work a crash redelivers. A job redelivered must still find its idempotency record: that record lives
    /// `PUSH_IDEMPOTENCY_TTL_S`, at least 60 s, and the job comes back up to the interval plus the group's session timeout
    /// (librdkafka's 45 s) after it finished. 10 s keeps that under the shortest retention.
    static let longestCommitInterval = 10_000
    /// The worker stores offsets as jobs finish and relies on librdkafka's periodic commit of them (`KafkaConsumer.defaultProperties`).
    private static let commitsOnlyOnRebalance =
        "stops the periodic commit of finished jobs' offsets: they are committed only on a rebalance or shutdown, so a crash redelivers every job since"

    /// The unsafe settings in `properties`, in the order of `all`, each as
    /// "PUSH_RDKAFKA_… <what it does>".
    static func settings(in properties: [String: String]) -> [String] {
        all.compactMap { unsafe in
            guard let value = properties[unsafe.name], unsafe.unsafeValue?(value) ?? true else { return nil }
            let variable = ConfigurationReference.rdkafkaVariable(for: unsafe.name)
            return (unsafe.unsafeValue == nil ? "\(variable) is set: it" : "\(variable)=\(value)") + " \(unsafe.consequence)"
        }
    }

    private static let isFalse: @Sendable (String) -> Bool = { ["false", "f", "0"].contains($0.normalized) }
    private static let isTrue: @Sendable (String) -> Bool = { ["true", "t", "1"].contains($0.normalized) }
    /// Integer properties read as 0 by librdkafka: `0`, `00`, `0x0`, `-0`, `0abc`.
    private static let isZero: @Sendable (String) -> Bool = { $0.integer == 0 }
    /// `acks`: `all` or `-1` wait for every in-sync replica; `0` and a count of replicas do not.
    private static let isNotAll: @Sendable (String) -> Bool = { !["all", "-1"].contains($0.normalized) }
}

/// librdkafka properties the worker sets itself (from `PUSH_KAFKA_BROKERS`, `PUSH_KAFKA_GROUP_ID` and
/// its offset handling), under any of librdkafka's names for them: a `PUSH_RDKAFKA_*` for one of
/// them is refused, whatever `PUSH_RDKAFKA_ALLOW_UNSAFE` says (two names for one property would
/// leave the winner to the order librdkafka is handed them).
enum ManagedKafkaProperty {
    /// Property → what sets it, for the problem line.
    static let all: KeyValuePairs<String, String> = [
        "enable.auto.offset.store": "the worker stores the offset of a job only once its outcomes are acknowledged",
        "group.id": "PUSH_KAFKA_GROUP_ID sets it",
        "bootstrap.servers": "PUSH_KAFKA_BROKERS sets it",
        "metadata.broker.list": "it is librdkafka's other name for bootstrap.servers, which PUSH_KAFKA_BROKERS sets",
    ]

    /// One line per managed property set in `properties`, in the order of `all`.
    static func problems(in properties: [String: String]) -> [String] {
        all.compactMap { name, reason in
            properties[name] == nil ? nil : "\(ConfigurationReference.rdkafkaVariable(for: name)) cannot be overridden: \(reason)"
        }
    }
}

private extension String {
    var normalized: String { trimmingCharacters(in: .whitespaces).lowercased() }
    /// The value librdkafka sets for an integer property: C `strtol` with base 0 (leading white space, a sign, `0x` for hex
    /// or `0` for octal, up to the first other character: `1e3` is 1), saturated to a 64-bit long, then cut to a C `int`
    /// (`4294967296010000` is 10000, `-99999999999999999999` is 0); nil when no digit is read, which librdkafka refuses.
    var integer: Int? {
        var rest = utf8.drop { [0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D].contains($0) }
        let negative = rest.first == UInt8(ascii: "-")
        if negative || rest.first == UInt8(ascii: "+") { rest = rest.dropFirst() }
        var radix: UInt64 = 10
        var digits = 0
        if rest.first == UInt8(ascii: "0") {
            digits = 1
            rest = rest.dropFirst()
            radix = 8
            if let x = rest.first, x | 0x20 == UInt8(ascii: "x"), let next = rest.dropFirst().first, Self.digit(next, radix: 16) != nil {
                radix = 16
                rest = rest.dropFirst()
            }
        }
        var magnitude: UInt64 = 0
        var overflow = false
        for byte in rest {
            guard let digit = Self.digit(byte, radix: radix) else { break }
            digits += 1
            let (shifted, over) = magnitude.multipliedReportingOverflow(by: radix)
            let (sum, carry) = shifted.addingReportingOverflow(digit)
            overflow = overflow || over || carry
            magnitude = sum
        }
        guard digits > 0 else { return nil }
        let long: Int64
        if negative {
            long = overflow || magnitude > UInt64(Int64.max) + 1 ? .min : Int64(truncatingIfNeeded: 0 &- magnitude)
        } else {
            long = overflow || magnitude > UInt64(Int64.max) ? .max : Int64(magnitude)
        }
        return Int(Int32(truncatingIfNeeded: long))
    }

    private static func digit(_ byte: UInt8, radix: UInt64) -> UInt64? {
        let value: UInt64
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): value = UInt64(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): value = UInt64(byte - UInt8(ascii: "a")) + 10
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = UInt64(byte - UInt8(ascii: "A")) + 10
        default: return nil
        }
        return value < radix ? value : nil
    }
}

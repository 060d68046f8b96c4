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
        UnsafeKafkaProperty(name: "enable.auto.commit", unsafeValue: isFalse, consequence: commitsOnlyOnRebalance),
        UnsafeKafkaProperty(name: "auto.commit.interval.ms", unsafeValue: { $0.normalized == "0" }, consequence: commitsOnlyOnRebalance),
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
}

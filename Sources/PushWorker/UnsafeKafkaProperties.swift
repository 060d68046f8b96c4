import Foundation

/// librdkafka properties that turn off the authentication of the brokers or make librdkafka
/// load or run code from outside the image. Start-up refuses each of them, one line per
/// property, unless `PUSH_RDKAFKA_ALLOW_UNSAFE=true`. Names, values and meanings are those
/// of librdkafka's CONFIGURATION.md (2.0.2 and later); values are matched the way
/// librdkafka parses them (booleans `false`/`f`/`0`, enums case-insensitively).
struct UnsafeKafkaProperty: Sendable {
    let name: String
    /// Whether this value of the property is the unsafe one; nil: any value is.
    let unsafeValue: (@Sendable (String) -> Bool)?
    /// What the setting does, as the problem line states it after the setting.
    let consequence: String

    static let all: [UnsafeKafkaProperty] = [
        UnsafeKafkaProperty(name: "enable.ssl.certificate.verification", unsafeValue: isFalse,
                            consequence: "turns off verification of the brokers' TLS certificates"),
        UnsafeKafkaProperty(name: "ssl.endpoint.identification.algorithm", unsafeValue: { $0.normalized == "none" },
                            consequence: "turns off the check that a broker's certificate names its host"),
        UnsafeKafkaProperty(name: "enable.sasl.oauthbearer.unsecure.jwt", unsafeValue: isTrue,
                            consequence: "authenticates with librdkafka's unsigned test tokens (for development only)"),
        UnsafeKafkaProperty(name: "plugin.library.paths", unsafeValue: nil,
                            consequence: "loads shared libraries into the worker"),
        UnsafeKafkaProperty(name: "ssl.engine.location", unsafeValue: nil,
                            consequence: "loads an OpenSSL engine library into the worker"),
        UnsafeKafkaProperty(name: "sasl.kerberos.kinit.cmd", unsafeValue: nil,
                            consequence: "runs a shell command of its own"),
    ]

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
}

private extension String {
    var normalized: String { trimmingCharacters(in: .whitespaces).lowercased() }
}

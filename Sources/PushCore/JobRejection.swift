/// Why a consumed message is not a valid job. It goes to the dead-letter topic with
/// `code` and `message` in its headers.
public struct JobRejection: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        case tooLarge = "too_large"
        case invalidJSON = "invalid_json"
        case unsupportedVersion = "unsupported_version"
        case invalidField = "invalid_field"
        case unknownProvider = "unknown_provider"
        case attemptsExhausted = "attempts_exhausted"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// Bounds on what a job may be. Generous for real notifications, small enough that a
/// hostile producer cannot make a worker allocate without limit.
public struct JobLimits: Sendable, Equatable {
    /// Largest accepted Kafka message value, in bytes.
    public var maximumBytes: Int
    public var maximumTargets: Int
    public var maximumIdentifierLength: Int
    public var maximumTTLSeconds: Int64

    public static let `default` = JobLimits(
        maximumBytes: 131_072, maximumTargets: 100,
        maximumIdentifierLength: 256, maximumTTLSeconds: 2_419_200)

    public init(maximumBytes: Int, maximumTargets: Int, maximumIdentifierLength: Int, maximumTTLSeconds: Int64) {
        self.maximumBytes = maximumBytes
        self.maximumTargets = maximumTargets
        self.maximumIdentifierLength = maximumIdentifierLength
        self.maximumTTLSeconds = maximumTTLSeconds
    }
}

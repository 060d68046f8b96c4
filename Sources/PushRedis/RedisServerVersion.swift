extension RedisError {
    static let setupRefused = "connection setup (AUTH/SELECT) refused"

    /// The server refused the connection's `AUTH` (a wrong user or password: `WRONGPASS`) or `SELECT`.
    public var refusedConnectionSetup: Bool {
        if case .unavailable(let detail) = self { detail.hasPrefix(Self.setupRefused) } else { false }
    }
}

/// A Redis server's version, as `INFO server` gives it (`redis_version:7.0.15`).
public struct RedisServerVersion: Sendable, Comparable, CustomStringConvertible {
    public var major: Int
    public var minor: Int
    public var patch: Int

    /// The oldest Redis the stores run on: the dedupe claim is one `SET key value NX GET PX ms`, and `SET` takes `NX`
    /// with `GET` since Redis 7.0 (https://redis.io/docs/latest/commands/set/, history).
    public static let minimum = RedisServerVersion(major: 7, minor: 0, patch: 0)

    public init(major: Int, minor: Int, patch: Int) {
        self.major = major
        self.minor = minor
        self.patch = patch
    }

    /// `7.0.15`, `6.2`; nil for anything that does not start with numbers.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false).map { Int($0) }
        guard parts.count >= 2, parts.count <= 3, let major = parts[0], let minor = parts[1] else { return nil }
        let patch = parts.count == 3 ? parts[2] : 0
        guard let patch else { return nil }
        self.init(major: major, minor: minor, patch: patch)
    }

    /// The `redis_version` line of an `INFO` answer.
    public init?(info text: String) {
        for line in text.split(whereSeparator: \.isNewline) where line.hasPrefix("redis_version:") {
            self.init(line.dropFirst("redis_version:".count).trimmingCharacters(in: [" ", "\r"]))
            return
        }
        return nil
    }

    public static func < (left: RedisServerVersion, right: RedisServerVersion) -> Bool {
        (left.major, left.minor, left.patch) < (right.major, right.minor, right.patch)
    }

    public var description: String { "\(major).\(minor).\(patch)" }
}

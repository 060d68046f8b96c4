/// A Redis reply.
public enum RedisValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case bulk([UInt8])
    case status(String)
    case error(String)
    case array([RedisValue])

    public var string: String? {
        switch self {
        case .bulk(let bytes): String(decoding: bytes, as: UTF8.self)
        case .status(let text): text
        default: nil
        }
    }

    /// The bytes of a bulk or status reply; empty for anything else.
    var bytes: [UInt8] {
        switch self {
        case .bulk(let bytes): bytes
        case .status(let text): Array(text.utf8)
        default: []
        }
    }

    public var integer: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    public var isNull: Bool { self == .null }
}

public enum RedisError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server cannot be reached or the connection broke; the command may or may not have run.
    case unavailable(String)
    /// The server answered with an error reply.
    case reply(String)

    public var description: String {
        switch self {
        case .unavailable(let detail): "Redis unavailable: \(detail)"
        case .reply(let detail): "Redis error: \(detail)"
        }
    }
}

/// One command: its arguments as bytes.
public struct RedisCommand: Sendable {
    public var arguments: [[UInt8]]

    public init(_ arguments: [[UInt8]]) { self.arguments = arguments }

    public init(_ arguments: String...) { self.arguments = arguments.map { Array($0.utf8) } }

    public init(_ arguments: [String]) { self.arguments = arguments.map { Array($0.utf8) } }
}

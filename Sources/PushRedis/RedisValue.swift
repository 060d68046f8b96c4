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
        case .unavailable(let detail):
            detail.contains("WRONGPASS")
                ? "Redis unavailable: \(detail) (check the user and password of PUSH_REDIS_URL)"
                : "Redis unavailable: \(detail)"
        case .reply(let detail):
            RedisClient.meansDenied(detail)
                ? "Redis error: \(detail) (the ACL of PUSH_REDIS_URL's user lacks a command the worker needs: see docs/operations.md)"
                : "Redis error: \(detail)"
        }
    }
}

/// One command, kept as it goes on the wire (RESP2: an array of bulk strings), so that a pipeline
/// is its commands' bytes one after another, with no argument copied again.
public struct RedisCommand: Sendable {
    public private(set) var encoded: [UInt8]
    private let argumentCount: Int
    private var written = 0

    public init(_ arguments: [[UInt8]]) {
        self.init(argumentCount: arguments.count, capacity: arguments.reduce(0) { $0 + $1.count })
        for argument in arguments { append(bytes: argument) }
    }

    public init(_ arguments: String...) { self.init(arguments) }

    public init(_ arguments: [String]) {
        self.init(argumentCount: arguments.count, capacity: arguments.reduce(0) { $0 + $1.utf8.count })
        for argument in arguments { append(argument) }
    }

    /// A command of `argumentCount` arguments, each appended next; `capacity` is their bytes together.
    init(argumentCount: Int, capacity: Int) {
        self.argumentCount = argumentCount
        encoded = []
        encoded.reserveCapacity(capacity + 16 + argumentCount * 16)
        encoded.append(UInt8(ascii: "*"))
        Self.appendDecimal(argumentCount, to: &encoded)
        encoded.append(contentsOf: Self.lineEnd)
    }

    mutating func append(_ argument: String) {
        var argument = argument
        argument.withUTF8 { append(bytes: $0) }
    }

    mutating func append(_ argument: Int64) { append(String(argument)) }

    mutating func append(bytes argument: some Collection<UInt8>) {
        beginArgument(count: argument.count)
        encoded.append(contentsOf: argument)
        encoded.append(contentsOf: Self.lineEnd)
    }

    mutating func append(_ key: some CommandKey) {
        let count = key.byteCount
        beginArgument(count: count)
        let start = encoded.count
        key.write(to: &encoded)
        assert(encoded.count - start == count, "a key's bytes differ from its count")
        encoded.append(contentsOf: Self.lineEnd)
    }

    private mutating func beginArgument(count: Int) {
        assert(written < argumentCount, "more arguments than the command declared")
        written += 1
        encoded.append(UInt8(ascii: "$"))
        Self.appendDecimal(count, to: &encoded)
        encoded.append(contentsOf: Self.lineEnd)
    }

    /// Every declared argument was appended: a command missing one would leave Redis waiting for it.
    var isComplete: Bool { written == argumentCount }

    /// The arguments, read back from the encoding.
    public var arguments: [[UInt8]] { argumentRanges().map { Array(encoded[$0]) } }

    /// Where each argument's bytes are in `encoded`.
    func argumentRanges(limit: Int = .max) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var index = encoded.firstIndex(of: 10).map { $0 + 1 } ?? encoded.count
        while index < encoded.count, ranges.count < limit {
            guard let end = encoded[index...].firstIndex(of: 13) else { break }
            let length = encoded[(index + 1)..<end].reduce(0) { $0 * 10 + Int($1 &- 48) }
            let start = end + 2
            ranges.append(start..<(start + length))
            index = start + length + 2
        }
        return ranges
    }

    private static let lineEnd: [UInt8] = [13, 10]

    /// A count's decimal digits (a small string: no allocation).
    static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: String(value).utf8)
    }
}

/// A strict RFC 8259 parser for untrusted input: valid UTF-8 only, no duplicate
/// object keys, bounded nesting, no trailing content.
public struct JSONParser {
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let message: String
        public let offset: Int
        public var description: String { "\(message) at byte \(offset)" }
    }

    public static let defaultMaximumDepth = 32
    static let membersScannedForDuplicates = 16

    /// Lent by `parse` for the parse alone: every read is preceded by a check of `index` against its count.
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private let maximumDepth: Int
    /// The members of the objects being parsed, innermost last: each object's array is made once,
    /// at its exact size, when it ends (appending to it as it grew cost an allocation per doubling).
    private var openMembers: [(key: String, value: JSONValue)] = []

    private init(_ bytes: UnsafeBufferPointer<UInt8>, maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
        openMembers.reserveCapacity(32)
    }

    public static func parse(_ bytes: [UInt8], maximumDepth: Int = defaultMaximumDepth) throws(Failure) -> JSONValue {
        let result = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(Failure) -> JSONValue in
                var parser = JSONParser(buffer, maximumDepth: maximumDepth)
                parser.skipWhitespace()
                let value = try parser.parseValue(depth: 0)
                parser.skipWhitespace()
                guard parser.index == parser.bytes.count else { throw parser.failure("unexpected content after the JSON value") }
                return value
            }
        }
        return try result.get()
    }

    private func failure(_ message: String) -> Failure { Failure(message: message, offset: index) }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(Failure) -> JSONValue {
        guard index < bytes.count else { throw failure("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw failure("unexpected character")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(Failure) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw failure("unexpected end of input") }
        let expected = UnsafeBufferPointer(start: literal.utf8Start, count: count)
        for offset in 0..<count where bytes[index + offset] != expected[offset] {
            throw failure("invalid literal")
        }
        index += count
    }

    private mutating func parseObject(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= maximumDepth else { throw failure("nesting deeper than \(maximumDepth)") }
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object([])
        }
        let first = openMembers.count
        // Small objects (a job's are) are checked for duplicates by scanning: cheaper than hashing every name.
        var seen: Set<String>?
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a member name") }
            let key = try parseString()
            let count = openMembers.count - first
            if seen == nil, count < Self.membersScannedForDuplicates {
                guard !openMembers[first...].contains(where: { $0.key == key }) else { throw failure("duplicate member \"\(key)\"") }
            } else {
                if seen == nil { seen = Set(openMembers[first...].map(\.key)) }
                guard seen!.insert(key).inserted else { throw failure("duplicate member \"\(key)\"") }
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            openMembers.append((key, value))
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(takeOpenMembers(from: first))
            }
            throw failure("expected ',' or '}'")
        }
    }

    /// The members of the object being closed, moved out of `openMembers` (from the end, so nothing is
    /// copied or retained again): copying the slice went through the runtime's generic copy of each tuple.
    private mutating func takeOpenMembers(from first: Int) -> [(key: String, value: JSONValue)] {
        let count = openMembers.count - first
        return [(key: String, value: JSONValue)](unsafeUninitializedCapacity: count) { buffer, initialized in
            for position in stride(from: count - 1, through: 0, by: -1) {
                (buffer.baseAddress! + position).initialize(to: openMembers.removeLast())
            }
            initialized = count
        }
    }

    private mutating func parseArray(depth: Int) throws(Failure) -> JSONValue {
        guard depth <= maximumDepth else { throw failure("nesting deeper than \(maximumDepth)") }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            throw failure("expected ',' or ']'")
        }
    }

    private mutating func parseNumber() throws(Failure) -> JSONValue {
        let start = index
        var isInteger = true
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger {
            guard let value = Int64(text) else { throw Failure(message: "integer out of range", offset: start) }
            return .integer(value)
        }
        guard let value = Double(text), value.isFinite else { throw Failure(message: "number out of range", offset: start) }
        return .double(value)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func parseString() throws(Failure) -> String {
        index += 1
        let start = index
        // Fast path: no escapes.
        var bitsSeen: UInt8 = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let content = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return bitsSeen < 0x80 ? String(decoding: content, as: UTF8.self) : try validatedString(content, offset: start)
            }
            bitsSeen |= byte
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw failure("control character in string") }
            index += 1
        }
        var scalars = [UInt8](bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return try scalars.withUnsafeBufferPointer { content throws(Failure) in try validatedString(content, offset: start) }
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw failure("unexpected end of input") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append(0x22)
                case UInt8(ascii: "\\"): scalars.append(0x5C)
                case UInt8(ascii: "/"): scalars.append(0x2F)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                        else { throw failure("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw failure("unpaired surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(code) {
                        throw failure("unpaired surrogate")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw failure("invalid escape") }
                    scalars.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    throw failure("invalid escape")
                }
            default:
                if byte < 0x20 { throw failure("control character in string") }
                scalars.append(byte)
                index += 1
            }
        }
        throw failure("unterminated string")
    }

    private mutating func parseHex4() throws(Failure) -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("unexpected end of input") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// `String(validating:as:)` is not specialised in the standard library: it looked up generic metadata
    /// on every call, a fifth of a job's decoding. Decoding repairs ill-formed UTF-8 (U+FFFD for each
    /// maximal invalid subpart), so the bytes come back unchanged exactly when they were valid.
    private func validatedString(_ utf8: UnsafeBufferPointer<UInt8>, offset: Int) throws(Failure) -> String {
        let string = String(decoding: utf8, as: UTF8.self)
        let unchanged = string.utf8.withContiguousStorageIfAvailable { $0.elementsEqual(utf8) } ?? string.utf8.elementsEqual(utf8)
        guard unchanged else { throw Failure(message: "invalid UTF-8 in string", offset: offset) }
        return string
    }
}

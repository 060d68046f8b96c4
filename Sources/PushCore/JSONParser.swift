/// A strict RFC 8259 parser for untrusted input: valid UTF-8 only, no duplicate
/// object keys, bounded nesting, no trailing content. It reads a document once into a `JSONDocument`;
/// `parse` makes the tree of it.
public struct JSONParser {
    public struct Failure: Error, Equatable, CustomStringConvertible {
        public let message: String
        public let offset: Int
        public var description: String { "\(message) at byte \(offset)" }
    }

    public static let defaultMaximumDepth = 32
    static let membersScannedForDuplicates = 16

    /// Lent by `document` for the parse alone: every read is preceded by a check of `index` against its count.
    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private let maximumDepth: Int
    /// The document's nodes so far, in document order (`JSONDocument.Node`).
    private var nodes: [JSONDocument.Node] = []

    private init(_ bytes: UnsafeBufferPointer<UInt8>, maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    public static func parse(_ bytes: [UInt8], maximumDepth: Int = defaultMaximumDepth) throws(Failure) -> JSONValue {
        try document(bytes, maximumDepth: maximumDepth).value
    }

    static func document(_ bytes: [UInt8], maximumDepth: Int) throws(Failure) -> JSONDocument {
        guard bytes.count < Int32.max else { throw Failure(message: "document larger than 2 GiB", offset: 0) }
        let result = bytes.withUnsafeBufferPointer { buffer in
            Result { () throws(Failure) -> [JSONDocument.Node] in
                var parser = JSONParser(buffer, maximumDepth: maximumDepth)
                // About one node for every 7 bytes of a job, so a job's list is made once; a larger document (a long
                // opaque body is one node) grows its list as it needs.
                parser.nodes.reserveCapacity(min(buffer.count / 6 + 4, 512))
                parser.skipWhitespace()
                try parser.parseValue(depth: 0)
                parser.skipWhitespace()
                guard parser.index == parser.bytes.count else { throw parser.failure("unexpected content after the JSON value") }
                return parser.nodes
            }
        }
        return JSONDocument(bytes: bytes, nodes: try result.get())
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

    /// Appends the value's nodes; its first is its own.
    private mutating func parseValue(depth: Int) throws(Failure) {
        guard index < bytes.count else { throw failure("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): try parseString()
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            append(JSONDocument.Node(kind: .bool, bits: 1))
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            append(JSONDocument.Node(kind: .bool, bits: 0))
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            append(JSONDocument.Node(kind: .null))
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): try parseNumber()
        default: throw failure("unexpected character")
        }
    }

    /// Appends a node without contents: the next node is the one after it.
    private mutating func append(_ node: JSONDocument.Node) {
        var node = node
        node.next = Int32(nodes.count + 1)
        nodes.append(node)
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

    private mutating func parseObject(depth: Int) throws(Failure) {
        guard depth <= maximumDepth else { throw failure("nesting deeper than \(maximumDepth)") }
        index += 1
        let object = nodes.count
        nodes.append(JSONDocument.Node(kind: .object))
        defer { nodes[object].next = Int32(nodes.count) }
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return
        }
        var count: Int32 = 0
        // Small objects (a job's are) are checked for duplicates by scanning: cheaper than hashing every name.
        var seen: Set<String>?
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw failure("expected a member name") }
            let name = nodes.count
            try parseString()
            try checkNotRepeated(name, in: object, members: count, seen: &seen)
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            try parseValue(depth: depth)
            count += 1
            nodes[object].count = count
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return
            }
            throw failure("expected ',' or '}'")
        }
    }

    /// Refuses the member name at node `name` if one of the object's `members` before it has it (compared as `String ==`
    /// compares), at the offset just after the name.
    private mutating func checkNotRepeated(_ name: Int, in object: Int, members: Int32, seen: inout Set<String>?) throws(Failure) {
        if seen == nil, members < Self.membersScannedForDuplicates {
            var position = object + 1
            for _ in 0..<members {
                if namesEqual(position, name) { throw failure("duplicate member \"\(string(at: name))\"") }
                position = Int(nodes[position + 1].next)
            }
            return
        }
        if seen == nil {
            var names = Set<String>()
            var position = object + 1
            for _ in 0..<members {
                names.insert(string(at: position))
                position = Int(nodes[position + 1].next)
            }
            seen = names
        }
        let key = string(at: name)
        guard seen!.insert(key).inserted else { throw failure("duplicate member \"\(key)\"") }
    }

    private func namesEqual(_ first: Int, _ second: Int) -> Bool { JSONDocument.namesEqual(nodes[first], nodes[second], in: bytes) }

    private func string(at node: Int) -> String { JSONDocument.string(nodes[node], in: bytes) }

    private mutating func parseArray(depth: Int) throws(Failure) {
        guard depth <= maximumDepth else { throw failure("nesting deeper than \(maximumDepth)") }
        index += 1
        let array = nodes.count
        nodes.append(JSONDocument.Node(kind: .array))
        defer { nodes[array].next = Int32(nodes.count) }
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return
        }
        var count: Int32 = 0
        while true {
            skipWhitespace()
            try parseValue(depth: depth)
            count += 1
            nodes[array].count = count
            skipWhitespace()
            guard index < bytes.count else { throw failure("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return
            }
            throw failure("expected ',' or ']'")
        }
    }

    private mutating func parseNumber() throws(Failure) {
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
            return append(JSONDocument.Node(kind: .integer, bits: UInt64(bitPattern: value)))
        }
        guard let value = Double(text), value.isFinite else { throw Failure(message: "number out of range", offset: start) }
        append(JSONDocument.Node(kind: .double, bits: value.bitPattern))
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    private mutating func parseString() throws(Failure) {
        index += 1
        let start = index
        // Fast path: no escapes.
        var bitsSeen: UInt8 = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let ascii = bitsSeen < 0x80
                guard ascii || Self.isValidUTF8(UnsafeBufferPointer(rebasing: bytes[start..<index])) else {
                    throw Failure(message: "invalid UTF-8 in string", offset: start)
                }
                nodes.append(
                    JSONDocument.Node(
                        kind: .string, ascii: ascii, start: Int32(start), end: Int32(index), next: Int32(nodes.count + 1)))
                index += 1
                return
            }
            bitsSeen |= byte
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw failure("control character in string") }
            index += 1
        }
        _ = try unescapedString(from: start)
        nodes.append(
            JSONDocument.Node(kind: .string, escaped: true, start: Int32(start), end: Int32(index - 1), next: Int32(nodes.count + 1)))
    }

    /// The string whose content starts at `start` (after its opening quote), its escapes read: the parse checks a string
    /// with escapes by reading it (the same failures at the same offsets as reading it whole), a document reads it again
    /// when it is asked for it.
    static func unescaped(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) throws(Failure) -> String {
        var parser = JSONParser(bytes, maximumDepth: 0)
        parser.index = start
        return try parser.unescapedString(from: start)
    }

    /// Reads from `index` (at or after `start`, where no escape came before) to past the closing quote.
    private mutating func unescapedString(from start: Int) throws(Failure) -> String {
        var scalars = [UInt8](bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return try scalars.withUnsafeBufferPointer { content throws(Failure) in
                    guard Self.isValidUTF8(content) else { throw Failure(message: "invalid UTF-8 in string", offset: start) }
                    return String(decoding: content, as: UTF8.self)
                }
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

    /// Whether `utf8` is well-formed UTF-8 (the Unicode standard's table 3-7: no overlong forms, no surrogates, nothing
    /// above U+10FFFF): what `String(decoding:as:)` keeps unchanged. (`String(validating:as:)` is not specialised in the
    /// standard library: it looked up generic metadata on every call, a fifth of a job's decoding.)
    static func isValidUTF8(_ utf8: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let count = utf8.count
        func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
            index + offset < count && range.contains(utf8[index + offset])
        }
        while index < count {
            let lead = utf8[index]
            switch lead {
            case 0x00...0x7F:
                index += 1
            case 0xC2...0xDF:
                guard continuation(1) else { return false }
                index += 2
            case 0xE0...0xEF:
                let second: ClosedRange<UInt8> = lead == 0xE0 ? 0xA0...0xBF : lead == 0xED ? 0x80...0x9F : 0x80...0xBF
                guard continuation(1, second), continuation(2) else { return false }
                index += 3
            case 0xF0...0xF4:
                let second: ClosedRange<UInt8> = lead == 0xF0 ? 0x90...0xBF : lead == 0xF4 ? 0x80...0x8F : 0x80...0xBF
                guard continuation(1, second), continuation(2), continuation(3) else { return false }
                index += 4
            default:
                return false
            }
        }
        return true
    }
}

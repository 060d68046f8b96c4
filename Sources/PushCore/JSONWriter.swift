/// Appends compact JSON to a byte buffer. Used for outcomes and provider payloads,
/// where the field order and the exact bytes matter and Foundation is too slow.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    /// Open objects and arrays. Whether the next value needs a comma first is read from the last byte:
    /// none after `{`, `[` or a key's `:`, one after anything else inside a container.
    private var depth = 0

    public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    public var string: String { String(decoding: bytes, as: UTF8.self) }

    /// The bytes written, moved out (the writer is left empty): appending to them then copies nothing.
    public mutating func takeBytes() -> [UInt8] {
        defer { bytes = [] }
        return bytes
    }

    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        depth += 1
    }
    public mutating func endObject() {
        depth -= 1
        bytes.append(UInt8(ascii: "}"))
    }
    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        depth += 1
    }
    public mutating func endArray() {
        depth -= 1
        bytes.append(UInt8(ascii: "]"))
    }

    /// Starts an object member; the next value written is its value.
    public mutating func key(_ name: String) {
        separate()
        appendQuoted(name)
        bytes.append(UInt8(ascii: ":"))
    }

    public mutating func value(_ string: String) {
        separate()
        appendQuoted(string)
    }
    public mutating func value(_ integer: Int64) {
        separate()
        bytes.append(contentsOf: String(integer).utf8)
    }
    public mutating func value(_ integer: Int) { value(Int64(integer)) }
    /// A finite number as JSON writes it; NaN and infinities (which JSON cannot carry) as null.
    public mutating func value(_ double: Double) {
        guard double.isFinite else { return null() }
        separate()
        if double == double.rounded(), abs(double) < 1e15 {
            bytes.append(contentsOf: String(Int64(double)).utf8)
        } else {
            bytes.append(contentsOf: "\(double)".utf8)
        }
    }
    public mutating func value(_ strings: [String]) {
        beginArray()
        strings.forEach { value($0) }
        endArray()
    }
    public mutating func value(_ bool: Bool) {
        separate()
        bytes.append(contentsOf: (bool ? "true" : "false").utf8)
    }
    public mutating func null() {
        separate()
        bytes.append(contentsOf: "null".utf8)
    }

    public mutating func value(_ json: JSONValue) {
        switch json {
        case .null: null()
        case .bool(let flag): value(flag)
        case .integer(let number): value(number)
        case .double(let number):
            separate()
            bytes.append(contentsOf: (number.isFinite ? "\(number)" : "null").utf8)
        case .string(let text): value(text)
        case .array(let elements):
            beginArray()
            elements.forEach { value($0) }
            endArray()
        case .object(let members):
            beginObject()
            for member in members {
                key(member.key)
                value(member.value)
            }
            endObject()
        }
    }

    public mutating func member(_ name: String, _ string: String?) {
        key(name)
        if let string { value(string) } else { null() }
    }
    /// A string member whose value is `utf8`, valid UTF-8 (a JSON document carried as a string, say), without a `String`
    /// made of it first.
    public mutating func member(_ name: String, quoting utf8: [UInt8]) {
        key(name)
        utf8.withUnsafeBufferPointer { appendQuoted(utf8: $0) }
    }
    public mutating func member(_ name: String, _ integer: Int64?) {
        key(name)
        if let integer { value(integer) } else { null() }
    }
    public mutating func member(_ name: String, _ bool: Bool) {
        key(name)
        value(bool)
    }

    /// A member whose value is the time `millisecondsSinceEpoch` as `UTCTimestamp` writes it, written in place.
    public mutating func member(_ name: String, iso8601 millisecondsSinceEpoch: Int64) {
        key(name)
        bytes.append(UInt8(ascii: "\""))
        UTCTimestamp.appendISO8601(millisecondsSinceEpoch: millisecondsSinceEpoch, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func separate() {
        guard depth > 0, let last = bytes.last else { return }
        if last != UInt8(ascii: "{"), last != UInt8(ascii: "["), last != UInt8(ascii: ":") { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func appendQuoted(_ string: String) {
        var string = string
        string.withUTF8 { appendQuoted(utf8: $0) }
    }

    private mutating func appendQuoted(utf8: UnsafeBufferPointer<UInt8>) {
        bytes.append(UInt8(ascii: "\""))
        // Runs without anything to escape (nearly every string) are copied whole.
        var runStart = 0
        for index in utf8.indices {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
            appendEscaped(byte)
            runStart = index + 1
        }
        bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...]))
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func appendEscaped(_ byte: UInt8) {
        bytes.append(0x5C)
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
        case 0x0A: bytes.append(UInt8(ascii: "n"))
        case 0x0D: bytes.append(UInt8(ascii: "r"))
        case 0x09: bytes.append(UInt8(ascii: "t"))
        default:
            bytes.append(UInt8(ascii: "u"))
            bytes.append(0x30)
            bytes.append(0x30)
            bytes.append(Self.hexDigit(byte >> 4))
            bytes.append(Self.hexDigit(byte & 0xF))
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 { value < 10 ? 0x30 + value : UInt8(ascii: "a") + value - 10 }
}

/// Splits a fuzzer's input into the values a target needs, front to back. Missing bytes
/// read as zero, so every input yields values. Compiled into each target that uses it.
struct FuzzInput {
    private let bytes: [UInt8]
    private var position = 0

    init(_ start: UnsafeRawPointer, _ count: Int) {
        bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    }

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var isAtEnd: Bool { position >= bytes.count }

    mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func bool() -> Bool { byte() & 1 == 1 }

    /// Eight bytes, little-endian.
    mutating func rawInt64() -> Int64 {
        var value: UInt64 = 0
        for shift in stride(from: 0, to: 64, by: 8) { value |= UInt64(byte()) << UInt64(shift) }
        return Int64(bitPattern: value)
    }

    /// An Int64 that is often one of the values arithmetic breaks on: a selector byte picks
    /// an extreme, a small number, a realistic epoch in milliseconds, or eight raw bytes.
    mutating func int64() -> Int64 {
        let selector = byte()
        switch selector % 16 {
        case 0: return .min
        case 1: return .max
        case 2: return .min + Int64(byte())
        case 3: return .max - Int64(byte())
        case 4: return Int64(byte()) - 128
        case 5: return 1_795_310_000_000 + Int64(Int16(bitPattern: UInt16(byte()) << 8 | UInt16(byte()))) * 1000
        case 6: return 0
        case 7: return Int64(Int32(truncatingIfNeeded: rawInt64()))
        default: return rawInt64()
        }
    }

    mutating func int() -> Int { Int(truncatingIfNeeded: int64()) }

    /// A value in `range`, from raw bytes (for settings a configuration validates into a range).
    mutating func int64(in range: ClosedRange<Int64>) -> Int64 {
        let span = UInt64(bitPattern: range.upperBound &- range.lowerBound)
        let raw = UInt64(bitPattern: rawInt64())
        return range.lowerBound &+ Int64(bitPattern: span == .max ? raw : raw % (span + 1))
    }

    /// Length-prefixed bytes: one length byte below 0xF0, else three more bytes of length
    /// (big-endian), so one value can take most of a 128 KiB input.
    mutating func data() -> [UInt8] {
        let first = byte()
        var length = Int(first)
        if first >= 0xF0 { length = Int(byte()) << 16 | Int(byte()) << 8 | Int(byte()) }
        let end = min(bytes.count, position + length)
        guard position < end else { return [] }
        defer { position = end }
        return Array(bytes[position..<end])
    }

    mutating func string() -> String { String(decoding: data(), as: UTF8.self) }

    /// nil when the flag byte is odd.
    mutating func optionalString() -> String? { bool() ? nil : string() }

    mutating func rest() -> [UInt8] {
        guard position < bytes.count else { return [] }
        defer { position = bytes.count }
        return Array(bytes[position...])
    }
}

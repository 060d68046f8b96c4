/// The stored form of a final outcome (an idempotency record): only what the job and its target cannot give back.
/// A redelivered job rebuilds its outcome from the record and itself (`Outcome(record:job:target:)`), so the record
/// holds the status, attempts, time, HTTP status, provider message id, action, invalid-since time and reason, in
/// about 30 bytes for a delivered APNs push (its `apns-id` kept as 16 bytes) instead of the ~300 of the outcome JSON.
///
/// Layout: a format byte (1), the status and action as their index, a flags byte, then unsigned LEB128 varints:
/// attempts, at (ms), [httpStatus], [invalidSince], [provider message id: 16 bytes when it is a UUID, else a varint
/// length and its bytes], [reason: a varint length and its bytes], [the dead token of a dual binding: its index in
/// `BindingToken.allCases`, one byte].
public enum OutcomeRecord {
    static let format: UInt8 = 1

    private struct Flags: OptionSet {
        let rawValue: UInt8
        static let truncated = Flags(rawValue: 1)
        static let httpStatus = Flags(rawValue: 2)
        static let invalidSince = Flags(rawValue: 4)
        static let providerMessageId = Flags(rawValue: 8)
        static let reason = Flags(rawValue: 16)
        static let upperCaseUUID = Flags(rawValue: 32)
        static let lowerCaseUUID = Flags(rawValue: 64)
        static let token = Flags(rawValue: 128)
    }

    public static func encode(_ outcome: Outcome) -> [UInt8] {
        var flags: Flags = []
        if outcome.truncated { flags.insert(.truncated) }
        if outcome.httpStatus != nil { flags.insert(.httpStatus) }
        if outcome.invalidSince != nil { flags.insert(.invalidSince) }
        if outcome.reason != nil { flags.insert(.reason) }
        if outcome.token != nil { flags.insert(.token) }
        let uuid = outcome.providerMessageId.flatMap(PackedUUID.init)
        if let uuid {
            flags.insert(uuid.upperCase ? .upperCaseUUID : .lowerCaseUUID)
        } else if outcome.providerMessageId != nil {
            flags.insert(.providerMessageId)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32 + (uuid == nil ? outcome.providerMessageId?.utf8.count ?? 0 : 0) + (outcome.reason?.utf8.count ?? 0))
        bytes.append(format)
        bytes.append(UInt8(Outcome.Status.allCases.firstIndex(of: outcome.status)!))
        bytes.append(UInt8(Outcome.Action.allCases.firstIndex(of: outcome.action)!))
        bytes.append(flags.rawValue)
        appendVarint(UInt64(clamping: outcome.attempts), to: &bytes)
        appendVarint(UInt64(bitPattern: outcome.at), to: &bytes)
        if let status = outcome.httpStatus { appendVarint(UInt64(bitPattern: Int64(status)), to: &bytes) }
        if let since = outcome.invalidSince { appendVarint(UInt64(bitPattern: since), to: &bytes) }
        if let uuid {
            bytes.append(contentsOf: uuid.bytes)
        } else if let id = outcome.providerMessageId {
            appendString(id, to: &bytes)
        }
        if let reason = outcome.reason { appendString(reason, to: &bytes) }
        if let token = outcome.token { bytes.append(UInt8(BindingToken.allCases.firstIndex(of: token)!)) }
        return bytes
    }

    /// The outcome `record` stores for `target` of `job`; nil when the bytes are not a record of this format.
    public static func decode(_ record: [UInt8], job: Job, target: Target) -> Outcome? {
        var reader = Reader(bytes: record)
        guard reader.byte() == format, let statusIndex = reader.byte(), let actionIndex = reader.byte(),
            let flagBits = reader.byte(),
            Int(statusIndex) < Outcome.Status.allCases.count, Int(actionIndex) < Outcome.Action.allCases.count,
            let attempts = reader.varint(), let at = reader.varint()
        else { return nil }
        let flags = Flags(rawValue: flagBits)
        var outcome = Outcome(
            jobId: job.id, userId: job.userId, bindingId: target.bindingId, provider: target.provider, app: target.app,
            status: Outcome.Status.allCases[Int(statusIndex)], action: Outcome.Action.allCases[Int(actionIndex)],
            attempts: Int(clamping: attempts), truncated: flags.contains(.truncated), at: Int64(bitPattern: at))
        if flags.contains(.httpStatus) {
            guard let status = reader.varint() else { return nil }
            outcome.httpStatus = Int(truncatingIfNeeded: Int64(bitPattern: status))
        }
        if flags.contains(.invalidSince) {
            guard let since = reader.varint() else { return nil }
            outcome.invalidSince = Int64(bitPattern: since)
        }
        if !flags.isDisjoint(with: [.upperCaseUUID, .lowerCaseUUID]) {
            guard let bytes = reader.bytes(16) else { return nil }
            outcome.providerMessageId = PackedUUID(bytes: bytes, upperCase: flags.contains(.upperCaseUUID)).text
        } else if flags.contains(.providerMessageId) {
            guard let id = reader.string() else { return nil }
            outcome.providerMessageId = id
        }
        if flags.contains(.reason) {
            guard let reason = reader.string() else { return nil }
            outcome.reason = reason
        }
        if flags.contains(.token) {
            guard let index = reader.byte(), Int(index) < BindingToken.allCases.count else { return nil }
            outcome.token = BindingToken.allCases[Int(index)]
        }
        guard reader.isAtEnd else { return nil }
        return outcome
    }

    private static func appendVarint(_ value: UInt64, to bytes: inout [UInt8]) {
        var rest = value
        while rest >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: rest) | 0x80)
            rest >>= 7
        }
        bytes.append(UInt8(rest))
    }

    private static func appendString(_ text: String, to bytes: inout [UInt8]) {
        appendVarint(UInt64(text.utf8.count), to: &bytes)
        bytes.append(contentsOf: text.utf8)
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        var isAtEnd: Bool { index == bytes.count }

        mutating func byte() -> UInt8? {
            guard index < bytes.count else { return nil }
            defer { index += 1 }
            return bytes[index]
        }

        mutating func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while let byte = byte() {
                guard shift < 64 else { return nil }
                value |= UInt64(byte & 0x7f) << shift
                if byte < 0x80 { return value }
                shift += 7
            }
            return nil
        }

        mutating func bytes(_ count: Int) -> ArraySlice<UInt8>? {
            guard count >= 0, bytes.count - index >= count else { return nil }
            defer { index += count }
            return bytes[index..<index + count]
        }

        mutating func string() -> String? {
            guard let length = varint(), length <= UInt64(bytes.count), let text = bytes(Int(length)) else { return nil }
            return String(decoding: text, as: UTF8.self)
        }
    }

    /// A canonical UUID in one letter case (APNs' `apns-id`), as its 16 bytes.
    private struct PackedUUID {
        let bytes: [UInt8]
        let upperCase: Bool

        private static let hyphens: Set<Int> = [8, 13, 18, 23]

        init?(_ text: String) {
            let utf8 = Array(text.utf8)
            guard utf8.count == 36 else { return nil }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(16)
            var upper = false
            var lower = false
            var high: UInt8?
            for (index, character) in utf8.enumerated() {
                if Self.hyphens.contains(index) {
                    guard character == UInt8(ascii: "-") else { return nil }
                    continue
                }
                let nibble: UInt8
                switch character {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = character - UInt8(ascii: "0")
                case UInt8(ascii: "A")...UInt8(ascii: "F"):
                    nibble = character - UInt8(ascii: "A") + 10
                    upper = true
                case UInt8(ascii: "a")...UInt8(ascii: "f"):
                    nibble = character - UInt8(ascii: "a") + 10
                    lower = true
                default: return nil
                }
                if let first = high {
                    bytes.append(first << 4 | nibble)
                    high = nil
                } else {
                    high = nibble
                }
            }
            // Mixed case would not come back the same from one case flag.
            guard !(upper && lower) else { return nil }
            self.bytes = bytes
            upperCase = upper
        }

        init(bytes: ArraySlice<UInt8>, upperCase: Bool) {
            self.bytes = Array(bytes)
            self.upperCase = upperCase
        }

        var text: String {
            let digits = Array((upperCase ? "0123456789ABCDEF" : "0123456789abcdef").utf8)
            var output: [UInt8] = []
            output.reserveCapacity(36)
            for (index, byte) in bytes.enumerated() {
                if [4, 6, 8, 10].contains(index) { output.append(UInt8(ascii: "-")) }
                output.append(digits[Int(byte >> 4)])
                output.append(digits[Int(byte & 15)])
            }
            return String(decoding: output, as: UTF8.self)
        }
    }
}

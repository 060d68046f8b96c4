/// Typed, checked access to a JSON object's members (a job, a target, a provider's part of a target).
/// Every refusal names the member by its path (`targets[0].token …`), so the upstream team can fix its
/// producer from the dead-letter header alone. It remembers which members were read, so the ones nobody
/// reads can be refused as unknown.
public struct Fields: Sendable {
    public let members: [(key: String, value: JSONValue)]
    /// The prefix of every member's name in messages, e.g. `targets[2].`.
    public let path: String
    /// Which members were read: bit i for member i (a job's objects have a few members), then a set of indices beyond 64.
    private var readMask: UInt64 = 0
    private var readBeyond64: Set<Int> = []

    public init(members: [(key: String, value: JSONValue)], path: String) {
        self.members = members
        self.path = path
    }

    /// The member's value (nil for an absent or `null` member), without marking it read.
    public func value(_ name: String) -> JSONValue? {
        guard let index = index(of: name) else { return nil }
        return Self.present(members[index].value)
    }

    /// Whether member `name` is present and was read.
    public func wasRead(_ name: String) -> Bool {
        index(of: name).map(isRead) ?? false
    }

    /// Names of other byte lengths are told apart by their lengths alone: `String ==` of two different
    /// strings checks canonical equivalence, which was the costlier part of reading a job's members.
    /// (So a name spelt with a character canonically equal to an ASCII letter, the Kelvin sign for
    /// `K`, names no member; RFC 8259 §8.3 compares names code unit by code unit.)
    private func index(of name: String) -> Int? {
        let length = name.utf8.count
        return members.firstIndex { $0.key.utf8.count == length && $0.key == name }
    }

    private func isRead(_ index: Int) -> Bool {
        index < 64 ? readMask & (1 << UInt64(index)) != 0 : readBeyond64.contains(index)
    }

    /// The member's value (nil for an absent or `null` member), marked read.
    private mutating func take(_ name: String) -> JSONValue? {
        guard let index = index(of: name) else { return nil }
        if index < 64 { readMask |= 1 << UInt64(index) } else { readBeyond64.insert(index) }
        return Self.present(members[index].value)
    }

    private static func present(_ value: JSONValue) -> JSONValue? {
        if case .null = value { return nil }
        return value
    }

    public func has(_ name: String) -> Bool { value(name) != nil }

    /// A refusal of this object's member `name`.
    public func invalid(_ name: String, _ rule: String) -> JobRejection {
        JobRejection(.invalidField, "\(path)\(name) \(rule)")
    }

    /// A refusal about the object as a whole (`rule` names the members).
    public func invalid(_ rule: String) -> JobRejection {
        JobRejection(.invalidField, "\(path)\(rule)")
    }

    public mutating func required(_ name: String) throws(JobRejection) -> JSONValue {
        guard let value = take(name) else { throw JobRejection(.invalidField, "\(path)\(name) is required") }
        return value
    }

    /// What a string field may contain. Identifiers, tokens, keys and endpoints can reach an HTTP
    /// header or URL (apns-collapse-id, apns-topic, the path, a template's header): a CR or LF there
    /// would end the header and start another, so they refuse every control character. Only
    /// notification text (shown to the user, always JSON-escaped) may carry line breaks.
    public enum Content: Sendable {
        case identifier, text
    }

    public mutating func requiredString(_ name: String, maximumLength: Int) throws(JobRejection) -> String {
        guard let string = try optionalString(name, maximumLength: maximumLength), !string.isEmpty else {
            throw JobRejection(.invalidField, "\(path)\(name) is required and must be a non-empty string")
        }
        return string
    }

    public mutating func optionalString(_ name: String, maximumLength: Int, content: Content = .identifier) throws(JobRejection) -> String?
    {
        guard let value = take(name) else { return nil }
        guard case .string(let string) = value else {
            throw JobRejection(.invalidField, "\(path)\(name) must be a string, not \(value.typeName)")
        }
        guard string.utf8.count <= maximumLength else {
            throw JobRejection(.invalidField, "\(path)\(name) is longer than \(maximumLength) bytes")
        }
        let hasControl = string.containsControlCharacter
        guard !hasControl || !string.containsUTF8Byte(where: { $0 == 0 }) else {
            throw JobRejection(.invalidField, "\(path)\(name) contains a NUL character")
        }
        if content == .identifier, hasControl {
            throw JobRejection(.invalidField, "\(path)\(name) contains a control character (CR, LF, tab, …): it can reach an HTTP header")
        }
        return string
    }

    public mutating func optionalInteger(_ name: String, in range: ClosedRange<Int64>) throws(JobRejection) -> Int64? {
        guard let value = take(name) else { return nil }
        guard case .integer(let number) = value else {
            throw JobRejection(.invalidField, "\(path)\(name) must be an integer, not \(value.typeName)")
        }
        guard range.contains(number) else {
            throw JobRejection(.invalidField, "\(path)\(name) must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return number
    }

    public mutating func optionalBool(_ name: String) throws(JobRejection) -> Bool? {
        guard let value = take(name) else { return nil }
        guard case .bool(let flag) = value else { throw invalid(name, "must be true or false, not \(value.typeName)") }
        return flag
    }

    /// A number (integer or not) within `range`; NaN and infinities cannot occur in parsed JSON.
    public mutating func optionalNumber(_ name: String, in range: ClosedRange<Double>) throws(JobRejection) -> Double? {
        guard let value = take(name) else { return nil }
        let number: Double
        switch value {
        case .integer(let integer): number = Double(integer)
        case .double(let double): number = double
        default: throw invalid(name, "must be a number, not \(value.typeName)")
        }
        guard range.contains(number) else { throw invalid(name, "must be between \(range.lowerBound) and \(range.upperBound)") }
        return number
    }

    /// An array of at most `maximumCount` strings, each checked like `optionalString`.
    public mutating func optionalStrings(
        _ name: String, maximumCount: Int, maximumLength: Int,
        content: Content = .identifier
    ) throws(JobRejection) -> [String]? {
        guard let value = take(name) else { return nil }
        guard case .array(let elements) = value else { throw invalid(name, "must be an array of strings, not \(value.typeName)") }
        guard elements.count <= maximumCount else { throw invalid(name, "has \(elements.count) entries, the limit is \(maximumCount)") }
        var strings: [String] = []
        for (index, element) in elements.enumerated() {
            var single = Fields(members: [("\(name)[\(index)]", element)], path: path)
            guard let string = try single.optionalString("\(name)[\(index)]", maximumLength: maximumLength, content: content) else {
                throw invalid("\(name)[\(index)]", "must be a string, not null")
            }
            strings.append(string)
        }
        return strings
    }

    public mutating func optionalObject(_ name: String) throws(JobRejection) -> Fields? {
        guard let value = take(name) else { return nil }
        guard case .object(let members) = value else {
            throw JobRejection(.invalidField, "\(path)\(name) must be an object, not \(value.typeName)")
        }
        return Fields(members: members, path: "\(path)\(name).")
    }

    /// One of `names`, as a string; the refusal lists them.
    public mutating func optionalChoice(_ name: String, of names: [String]) throws(JobRejection) -> String? {
        guard let text = try optionalString(name, maximumLength: 64) else { return nil }
        guard names.contains(text) else { throw invalid(name, "must be one of \(names.joined(separator: ", "))") }
        return text
    }

    func rejectUnknown(allowed: Set<String>) throws(JobRejection) {
        if let unknown = members.first(where: { !allowed.contains($0.key) }) {
            throw JobRejection(.invalidField, "\(path)\(unknown.key) is not a field of the v1 contract")
        }
    }

    /// Refuses the first member nobody read, with `rule` (default: not a field of the contract).
    public func rejectUnread(_ rule: String = "is not a field of the v1 contract") throws(JobRejection) {
        if let unknown = members.indices.first(where: { !isRead($0) }).map({ members[$0] }) {
            throw JobRejection(.invalidField, "\(path)\(unknown.key) \(rule)")
        }
    }
}

extension UInt8 {
    public var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
}

/// Typed, checked access to a JSON object's members (a job, a target, a provider's part of a target).
/// Every refusal names the member by its path (`targets[0].token …`), so the upstream team can fix its
/// producer from the dead-letter header alone. It remembers which members were read, so the ones nobody
/// reads can be refused as unknown. It reads the object where the parse left it (`JSONDocument`): a member's
/// name is compared in place and only the values read become `String`s.
public struct Fields: Sendable {
    private let document: JSONDocument
    /// The object's node in `document`.
    private let object: Int
    /// The prefix of every member's name in messages, e.g. `targets[2].`.
    public let path: String
    /// Which members were read: bit i for member i (a job's objects have a few members), then a set of indices beyond 64.
    private var readMask: UInt64 = 0
    private var readBeyond64: Set<Int> = []

    init(document: JSONDocument, object: Int, path: String) {
        self.document = document
        self.object = object
        self.path = path
    }

    /// An object of these members (for tests and tools: written, then parsed).
    public init(members: [(key: String, value: JSONValue)], path: String) {
        var writer = JSONWriter()
        writer.value(.object(members))
        // A tree of names and values always writes a document that parses (a repeated name aside, which the tree lets
        // through: then the first of them is the one read).
        let document = (try? JSONDocument(parsing: writer.bytes, maximumDepth: .max)) ?? Self.firstOfEachName(members)
        self.init(document: document, object: 0, path: path)
    }

    private static func firstOfEachName(_ members: [(key: String, value: JSONValue)]) -> JSONDocument {
        var names = Set<String>()
        var writer = JSONWriter()
        writer.value(.object(members.filter { names.insert($0.key).inserted }))
        return (try? JSONDocument(parsing: writer.bytes, maximumDepth: .max)) ?? JSONDocument(bytes: [], nodes: [.init(kind: .object)])
    }

    /// The members in document order, as trees.
    public var members: [(key: String, value: JSONValue)] {
        guard case .object(let members) = document.json(at: object) else { return [] }
        return members
    }

    /// The object as a tree.
    public var json: JSONValue { document.json(at: object) }

    /// Each member's name and value, in document order (nothing is marked read).
    public func forEachMember(_ body: (_ name: String, _ value: JSONDocument.Value) throws(JobRejection) -> Void) throws(JobRejection) {
        var position = object + 1
        for _ in 0..<document.nodes[object].count {
            try body(document.string(at: position), JSONDocument.Value(document: document, index: position + 1))
            position = document.next(after: position + 1)
        }
    }

    /// The number of members.
    public var count: Int { Int(document.nodes[object].count) }

    /// The member's value (nil for an absent or `null` member), without marking it read.
    public func value(_ name: String) -> JSONValue? {
        find(name).flatMap { present($0.value) }?.json
    }

    /// Whether member `name` is present and was read.
    public func wasRead(_ name: String) -> Bool {
        find(name).map { isRead($0.member) } ?? false
    }

    /// The member named `name` (`JSONDocument.member(named:in:)`).
    private func find(_ name: String) -> (member: Int, value: Int)? { document.member(named: name, in: object) }

    /// The node of member number `member`'s name.
    private func nameNode(_ member: Int) -> Int {
        var position = object + 1
        for _ in 0..<member { position = document.next(after: position + 1) }
        return position
    }

    private func isRead(_ index: Int) -> Bool {
        index < 64 ? readMask & (1 << UInt64(index)) != 0 : readBeyond64.contains(index)
    }

    /// The member's value (nil for an absent or `null` member), marked read.
    public mutating func take(_ name: String) -> JSONDocument.Value? {
        guard let (index, node) = find(name) else { return nil }
        if index < 64 { readMask |= 1 << UInt64(index) } else { readBeyond64.insert(index) }
        return present(node)
    }

    private func present(_ node: Int) -> JSONDocument.Value? {
        let value = JSONDocument.Value(document: document, index: node)
        return value.isNull ? nil : value
    }

    public func has(_ name: String) -> Bool { find(name).flatMap { present($0.value) } != nil }

    /// A refusal of this object's member `name`.
    public func invalid(_ name: String, _ rule: String) -> JobRejection {
        JobRejection(.invalidField, "\(path)\(name) \(rule)")
    }

    /// A refusal about the object as a whole (`rule` names the members).
    public func invalid(_ rule: String) -> JobRejection {
        JobRejection(.invalidField, "\(path)\(rule)")
    }

    public mutating func required(_ name: String) throws(JobRejection) -> JSONDocument.Value {
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
        return try checkedString(value, name, maximumLength: maximumLength, content: content)
    }

    private func checkedString(_ value: JSONDocument.Value, _ name: String, maximumLength: Int, content: Content) throws(JobRejection)
        -> String
    {
        guard let string = value.string else {
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
        guard let number = value.integer else {
            throw JobRejection(.invalidField, "\(path)\(name) must be an integer, not \(value.typeName)")
        }
        guard range.contains(number) else {
            throw JobRejection(.invalidField, "\(path)\(name) must be between \(range.lowerBound) and \(range.upperBound)")
        }
        return number
    }

    public mutating func optionalBool(_ name: String) throws(JobRejection) -> Bool? {
        guard let value = take(name) else { return nil }
        guard let flag = value.bool else { throw invalid(name, "must be true or false, not \(value.typeName)") }
        return flag
    }

    /// A number (integer or not) within `range`; NaN and infinities cannot occur in parsed JSON.
    public mutating func optionalNumber(_ name: String, in range: ClosedRange<Double>) throws(JobRejection) -> Double? {
        guard let value = take(name) else { return nil }
        guard let number = value.integer.map(Double.init) ?? value.double else {
            throw invalid(name, "must be a number, not \(value.typeName)")
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
        guard value.isArray else { throw invalid(name, "must be an array of strings, not \(value.typeName)") }
        guard value.count <= maximumCount else { throw invalid(name, "has \(value.count) entries, the limit is \(maximumCount)") }
        var strings: [String] = []
        strings.reserveCapacity(value.count)
        for (index, element) in value.elements.enumerated() {
            guard !element.isNull else { throw invalid("\(name)[\(index)]", "must be a string, not null") }
            strings.append(try checkedString(element, "\(name)[\(index)]", maximumLength: maximumLength, content: content))
        }
        return strings
    }

    public mutating func optionalObject(_ name: String) throws(JobRejection) -> Fields? {
        guard let value = take(name) else { return nil }
        guard let fields = value.fields(path: "\(path)\(name).") else {
            throw JobRejection(.invalidField, "\(path)\(name) must be an object, not \(value.typeName)")
        }
        return fields
    }

    /// One of `names`, as a string; the refusal lists them.
    public mutating func optionalChoice(_ name: String, of names: [String]) throws(JobRejection) -> String? {
        guard let text = try optionalString(name, maximumLength: 64) else { return nil }
        guard names.contains(text) else { throw invalid(name, "must be one of \(names.joined(separator: ", "))") }
        return text
    }

    /// Refuses the first member nobody read, with `rule` (default: not a field of the contract).
    public func rejectUnread(_ rule: String = "is not a field of the v1 contract") throws(JobRejection) {
        if let unread = (0..<count).first(where: { !isRead($0) }) {
            throw JobRejection(.invalidField, "\(path)\(document.string(at: nameNode(unread))) \(rule)")
        }
    }
}

extension UInt8 {
    public var isHexDigit: Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(self) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(self)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(self)
    }
}

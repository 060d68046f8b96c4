/// A JSON document parsed once (`JSONParser`) into a flat list of nodes over its bytes: each string, number and
/// container is one node in document order, a string is a range of the bytes, a number its value, a container the
/// count of its members and where its last one ends. Reading a job's fields from it makes a `String` of the values
/// it keeps and nothing else: no array per object, no name per member (`Fields` reads it). `value` makes the tree.
public struct JSONDocument: Sendable {
    public let bytes: [UInt8]
    let nodes: [Node]

    struct Node: Sendable {
        enum Kind: UInt8, Sendable {
            case null, bool, integer, double, string, array, object
        }
        var kind: Kind
        /// A string of ASCII bytes only (its escapes written in ASCII too).
        var ascii = false
        /// A string with escapes: its bytes are not its UTF-8.
        var escaped = false
        /// A string's content, between its quotes.
        var start: Int32 = 0
        var end: Int32 = 0
        /// The index of the first node after this one and everything in it.
        var next: Int32 = 0
        /// An array's elements, an object's members (an object's nodes are its members' names, each followed by its value).
        var count: Int32 = 0
        /// A bool's, an integer's or a double's bits.
        var bits: UInt64 = 0
    }

    init(bytes: [UInt8], nodes: [Node]) {
        self.bytes = bytes
        self.nodes = nodes
    }

    public init(parsing bytes: [UInt8], maximumDepth: Int = JSONParser.defaultMaximumDepth) throws(JSONParser.Failure) {
        self = try JSONParser.document(bytes, maximumDepth: maximumDepth)
    }

    /// The document's top-level value.
    public var root: Value { Value(document: self, index: 0) }

    /// The whole document as a tree.
    public var value: JSONValue { root.json }

    /// One value of the document: a node and the document that holds it.
    public struct Value: Sendable {
        let document: JSONDocument
        let index: Int

        var node: Node { document.nodes[index] }

        public var isNull: Bool { node.kind == .null }
        public var isObject: Bool { node.kind == .object }
        public var isArray: Bool { node.kind == .array }

        /// The JSON type name, for error messages (which alone read it).
        public var typeName: String { json.typeName }

        public var string: String? { node.kind == .string ? document.string(at: index) : nil }
        public var integer: Int64? { node.kind == .integer ? Int64(bitPattern: node.bits) : nil }
        public var double: Double? { node.kind == .double ? Double(bitPattern: node.bits) : nil }
        public var bool: Bool? { node.kind == .bool ? node.bits != 0 : nil }
        /// An array's elements or an object's members; 0 for anything else.
        public var count: Int { Int(node.count) }

        /// An array's elements in order; none for anything else.
        public var elements: Elements { Elements(document: document, first: index + 1, count: node.kind == .array ? count : 0) }

        public struct Elements: Sequence {
            let document: JSONDocument
            let first: Int
            let count: Int

            public func makeIterator() -> Iterator { Iterator(document: document, position: first, left: count) }

            public struct Iterator: IteratorProtocol {
                let document: JSONDocument
                var position: Int
                var left: Int

                public mutating func next() -> Value? {
                    guard left > 0 else { return nil }
                    left -= 1
                    defer { position = document.next(after: position) }
                    return Value(document: document, index: position)
                }
            }
        }

        /// The object's members read with `Fields` (their names prefixed with `path` in refusals); nil for anything else.
        public func fields(path: String) -> Fields? {
            node.kind == .object ? Fields(document: document, object: index, path: path) : nil
        }

        /// The value as a tree.
        public var json: JSONValue { document.json(at: index) }
    }

    /// The node after this one's subtree.
    func next(after index: Int) -> Int { Int(nodes[index].next) }

    /// The member of the object at node `object` named `name`: its number in document order and its value's node. Names
    /// are compared as their bytes (unescaped first when they have escapes): `String ==` of two different strings checks
    /// canonical equivalence, which was the costlier part of reading a job's members. (So a name spelt with a character
    /// canonically equal to an ASCII letter, the Kelvin sign for `K`, names no member; RFC 8259 §8.3 compares names code
    /// unit by code unit.)
    func member(named name: String, in object: Int) -> (member: Int, value: Int)? {
        var name = name
        return name.withUTF8 { name in
            nodes.withUnsafeBufferPointer { nodes in
                bytes.withUnsafeBufferPointer { bytes in
                    var position = object + 1
                    for member in 0..<Int(nodes[object].count) {
                        let node = nodes[position]
                        if node.escaped {
                            if Self.string(node, in: bytes).utf8.elementsEqual(name) { return (member, position + 1) }
                        } else if Int(node.end &- node.start) == name.count {
                            var offset = 0
                            let start = Int(node.start)
                            while offset < name.count, bytes[start &+ offset] == name[offset] { offset &+= 1 }
                            if offset == name.count { return (member, position + 1) }
                        }
                        position = Int(nodes[position + 1].next)
                    }
                    return nil
                }
            }
        }
    }

    /// Whether two names are the same, as `String ==` compares them: ASCII names without escapes byte for byte.
    static func namesEqual(_ first: Node, _ second: Node, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard first.ascii, second.ascii, !first.escaped, !second.escaped else {
            return string(first, in: bytes) == string(second, in: bytes)
        }
        let length = Int(first.end &- first.start)
        guard length == Int(second.end &- second.start) else { return false }
        let (a, b) = (Int(first.start), Int(second.start))
        var offset = 0
        while offset < length, bytes[a &+ offset] == bytes[b &+ offset] { offset &+= 1 }
        return offset == length
    }

    /// The string node at `index`, unescaped.
    func string(at index: Int) -> String {
        bytes.withUnsafeBufferPointer { Self.string(nodes[index], in: $0) }
    }

    /// A string node's value (its escapes and UTF-8 were checked by the parse, so reading it cannot fail).
    static func string(_ node: Node, in bytes: UnsafeBufferPointer<UInt8>) -> String {
        guard node.escaped else {
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[Int(node.start)..<Int(node.end)]), as: UTF8.self)
        }
        return (try? JSONParser.unescaped(bytes, from: Int(node.start))) ?? ""
    }

    func json(at index: Int) -> JSONValue {
        let node = nodes[index]
        switch node.kind {
        case .null: return .null
        case .bool: return .bool(node.bits != 0)
        case .integer: return .integer(Int64(bitPattern: node.bits))
        case .double: return .double(Double(bitPattern: node.bits))
        case .string: return .string(string(at: index))
        case .array: return .array(Value(document: self, index: index).elements.map(\.json))
        case .object:
            var members: [(key: String, value: JSONValue)] = []
            members.reserveCapacity(Int(node.count))
            var position = index + 1
            for _ in 0..<node.count {
                members.append((string(at: position), json(at: position + 1)))
                position = Int(nodes[position + 1].next)
            }
            return .object(members)
        }
    }
}

/// `redis://[[user]:password@]host[:port][,host[:port]…][/db]`: one node, or several seed nodes of
/// a Redis Cluster (any one of them is enough to learn the cluster; the others are tried when it
/// does not answer). `rediss://` is the same over TLS, to every node.
public struct RedisURL: Sendable, Equatable, CustomStringConvertible {
    /// `rediss://`: every connection is TLS, the server verified.
    public var usesTLS: Bool
    /// The first node.
    public var host: String
    public var port: Int
    /// Every node the URL names, the first one first.
    public var seeds: [RedisNodeAddress]
    public var database: Int
    public var username: String?
    public var password: String?

    public init?(_ text: String) {
        if text.hasPrefix("redis://") {
            usesTLS = false
        } else if text.hasPrefix("rediss://") {
            usesTLS = true
        } else {
            return nil
        }
        var rest = Substring(text.drop { $0 != "/" }.dropFirst(2))
        if let at = rest.lastIndex(of: "@") {
            let credentials = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                let user = credentials[..<colon]
                username = user.isEmpty ? nil : String(user)
                password = String(credentials[credentials.index(after: colon)...]).removingPercentEncodingIfPossible
            } else {
                password = String(credentials).removingPercentEncodingIfPossible
            }
        }
        var hostPort = rest
        database = 0
        if let slash = rest.firstIndex(of: "/") {
            hostPort = rest[..<slash]
            let db = rest[rest.index(after: slash)...]
            if !db.isEmpty {
                guard let number = Int(db), number >= 0 else { return nil }
                database = number
            }
        }
        var seeds: [RedisNodeAddress] = []
        for node in hostPort.split(separator: ",", omittingEmptySubsequences: false) {
            guard let address = Self.node(node) else { return nil }
            seeds.append(address)
        }
        guard let first = seeds.first else { return nil }
        self.seeds = seeds
        host = first.host
        port = first.port
    }

    private static func node(_ text: Substring) -> RedisNodeAddress? {
        var hostPart = text
        var port = 6379
        if let colon = text.lastIndex(of: ":"), !text.hasSuffix("]") {
            guard let number = Int(text[text.index(after: colon)...]), (1...65535).contains(number) else { return nil }
            port = number
            hostPart = text[..<colon]
        }
        let host = hostPart.trimmingCharacters(in: ["[", "]"])
        guard !host.isEmpty else { return nil }
        return RedisNodeAddress(host: host, port: port)
    }

    /// Masks whatever sits between `://` and `@` in a string that did not parse, for error messages.
    public static func masked(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@"), let scheme = text.range(of: "://") else { return text }
        return String(text[..<scheme.upperBound]) + "***" + String(text[at...])
    }

    /// The URL with the password masked, for logs.
    public var description: String {
        let credentials = password == nil ? "" : "\(username ?? ""):***@"
        return "\(usesTLS ? "rediss" : "redis")://\(credentials)\(seeds.map(\.description).joined(separator: ","))/\(database)"
    }
}

private extension String {
    var removingPercentEncodingIfPossible: String {
        guard contains("%") else { return self }
        var bytes: [UInt8] = []
        var iterator = utf8.makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%"), let high = iterator.next(), let low = iterator.next(),
                let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
            {
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func trimmingCharacters(in set: Set<Character>) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}

extension Substring {
    func trimmingCharacters(in set: Set<Character>) -> String { String(self).trimmingCharacters(in: set) }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The hosts reached without the egress proxy (`NO_PROXY`), matched as libcurl matches `CURLOPT_NOPROXY`: a list
/// separated by commas (and spaces) of host names, each matching itself and every name under it (`example.com` and
/// `.example.com` both match `example.com` and `a.example.com`, not `notexample.com`), case-insensitive, a trailing dot
/// ignored; IP addresses (IPv6 without brackets), exact or in CIDR notation (`10.0.0.0/8`, since curl 7.86), matching
/// IP literal hosts only; and `*` alone, which matches every host. A name is never resolved to match an address entry.
/// One deliberate difference: a port in an entry (`example.com:443`, `[::1]:443`) is ignored, as the request's port is.
/// Source: libcurl's CURLOPT_NOPROXY ("Each name in this list is matched as either a domain which contains the
/// hostname, or the hostname itself"; "The only wildcard available is a single * character"; CIDR "Since 7.86.0").
public struct NoProxyRules: Sendable, Hashable {
    enum Entry: Sendable, Hashable {
        /// Lower case, without a leading or trailing dot.
        case domain(String)
        case network(bytes: [UInt8], prefixLength: Int)
    }

    let matchesEverything: Bool
    let entries: [Entry]

    public init(_ list: String) {
        let trimmed = list.trimmingCharacters(in: .whitespaces)
        matchesEverything = trimmed == "*"
        var entries: [Entry] = []
        for token in trimmed.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }) {
            if let entry = Self.entry(token) { entries.append(entry) }
        }
        self.entries = matchesEverything ? [] : entries
    }

    /// Whether `host` (lower case or not, an IPv6 literal with or without brackets) is reached without the proxy.
    public func matches(_ host: String) -> Bool {
        if matchesEverything { return true }
        var name = Substring(host.lowercased())
        if name.hasPrefix("["), name.hasSuffix("]") { name = name.dropFirst().dropLast() }
        if let address = IPLiteral.bytes(String(name)) {
            return entries.contains { entry in
                guard case .network(let bytes, let length) = entry, bytes.count == address.count else { return false }
                return Self.prefix(of: address, equals: bytes, length: length)
            }
        }
        if name.hasSuffix(".") { name = name.dropLast() }
        return entries.contains { entry in
            guard case .domain(let domain) = entry else { return false }
            return name == domain || name.hasSuffix("." + domain)
        }
    }

    public var isEmpty: Bool { !matchesEverything && entries.isEmpty }

    /// For `check-config`: every host, or the entries as read (hosts and networks the operator named, no secret).
    public var summary: String { matchesEverything ? "every host (*)" : curlList.replacingOccurrences(of: ",", with: ", ") }

    /// The list for libcurl's `CURLOPT_NOPROXY`, rebuilt from what was read, so curl matches what this type matches.
    var curlList: String {
        if matchesEverything { return "*" }
        return entries.map { entry in
            switch entry {
            case .domain(let domain): domain
            case .network(let bytes, let length): "\(IPLiteral.text(bytes))/\(length)"
            }
        }.joined(separator: ",")
    }

    private static func entry(_ token: Substring) -> Entry? {
        var text = token
        // [v6]:port or [v6]
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            text = text[text.index(after: text.startIndex)..<close]
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            text = text[..<colon]
        }
        var length: Int?
        if let slash = text.firstIndex(of: "/") {
            guard let bits = Int(text[text.index(after: slash)...]) else { return nil }
            length = bits
            text = text[..<slash]
        }
        if let bytes = IPLiteral.bytes(String(text)) {
            let bits = min(max(length ?? bytes.count * 8, 0), bytes.count * 8)
            return .network(bytes: bytes, prefixLength: bits)
        }
        guard length == nil else { return nil }
        var domain = text.lowercased()[...]
        if domain.hasPrefix(".") { domain = domain.dropFirst() }
        if domain.hasSuffix(".") { domain = domain.dropLast() }
        return domain.isEmpty ? nil : .domain(String(domain))
    }

    private static func prefix(of address: [UInt8], equals network: [UInt8], length: Int) -> Bool {
        var remaining = length
        for index in address.indices where remaining > 0 {
            let bits = min(8, remaining)
            let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
            if address[index] & mask != network[index] & mask { return false }
            remaining -= bits
        }
        return true
    }
}

/// IPv4 and IPv6 literals as bytes (`inet_pton`, `inet_ntop`).
enum IPLiteral {
    /// The 4 or 16 bytes of `text`, nil when it is not an IPv4 or IPv6 literal.
    static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    static func text(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let written = bytes.withUnsafeBytes { raw in inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil }
        return written ? String(cString: buffer) : ""
    }
}

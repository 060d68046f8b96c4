/// Where an `https://` URL sends a request: the host and port to connect to, the `:authority`
/// and the `:path` (with query) of the HTTP/2 request. Read byte by byte; anything but an https
/// URL with a host, or one with user information, is not a target.
struct HTTPSTarget: Hashable, Sendable {
    /// Without brackets for an IPv6 literal.
    var host: String
    var port: Int
    var authority: String
    var path: String

    init?(_ url: String) {
        let bytes = Array(url.utf8)
        let scheme = Array("https://".utf8)
        guard bytes.count > scheme.count,
            zip(bytes, scheme).allSatisfy({ ($0 | 0x20) == $1 })
        else { return nil }
        let authorityStart = scheme.count
        var authorityEnd = authorityStart
        while authorityEnd < bytes.count, !"/?#".utf8.contains(bytes[authorityEnd]) { authorityEnd += 1 }
        let authority = bytes[authorityStart..<authorityEnd]
        guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")) else { return nil }

        var hostBytes: ArraySlice<UInt8>
        var portBytes: ArraySlice<UInt8> = []
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            hostBytes = authority[(authority.startIndex + 1)..<close]
            let rest = authority[(close + 1)...]
            if let colon = rest.first {
                guard colon == UInt8(ascii: ":") else { return nil }
                portBytes = rest.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
            hostBytes = authority[..<colon]
            portBytes = authority[(colon + 1)...]
        } else {
            hostBytes = authority
        }
        guard !hostBytes.isEmpty else { return nil }
        var port = 443
        if !portBytes.isEmpty {
            guard portBytes.count <= 5, portBytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            port = portBytes.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard (1...65_535).contains(port) else { return nil }
        }
        var pathEnd = bytes.firstIndex(of: UInt8(ascii: "#")) ?? bytes.count
        if pathEnd < authorityEnd { pathEnd = authorityEnd }
        let pathBytes = bytes[authorityEnd..<pathEnd]

        host = String(decoding: hostBytes, as: UTF8.self).lowercased()
        self.port = port
        self.authority = String(decoding: authority, as: UTF8.self)
        if pathBytes.first == UInt8(ascii: "/") {
            path = String(decoding: pathBytes, as: UTF8.self)
        } else {
            path = "/" + String(decoding: pathBytes, as: UTF8.self)
        }
    }
}

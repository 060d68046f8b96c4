import Foundation

/// The HTTP proxy provider traffic leaves through (`HTTPS_PROXY`), and the hosts reached without it (`NO_PROXY`), read
/// from the environment once with curl's rules: `https_proxy` before `HTTPS_PROXY` and `no_proxy` before `NO_PROXY` (the
/// lower-case name wins), a URL without a scheme is an `http://` one, a proxy without a port listens on 1080.
/// Sources: curl's manual, ENVIRONMENT ("[scheme]_proxy … The lowercase version has precedence"; "If the port number is
/// not specified in the proxy string, it is assumed to be 1080"); libcurl's CURLOPT_NOPROXY for `NoProxyRules`.
///
/// Requests go through it as an HTTP CONNECT tunnel (RFC 9110 §9.3.6) with TLS for the target inside. Only `http://`
/// proxies: TLS to the proxy itself is not implemented, and an `https://` proxy URL is refused at start-up. The
/// credentials of the URL's userinfo (percent-decoded) are sent as `Proxy-Authorization: Basic` and never shown:
/// `description` masks them.
public struct EgressProxy: Sendable, Hashable, CustomStringConvertible {
    /// The proxy's host, without brackets for an IPv6 literal.
    public let host: String
    public let port: Int
    /// The user and password of the URL's userinfo, decoded.
    let credentials: Credentials?
    public let noProxy: NoProxyRules

    struct Credentials: Sendable, Hashable {
        let user: String
        let password: String
    }

    /// The variables read, lower-case first (curl's order).
    public static let proxyVariables = ["https_proxy", "HTTPS_PROXY"]
    public static let noProxyVariables = ["no_proxy", "NO_PROXY"]
    /// curl's default proxy port.
    static let defaultPort = 1080

    /// Reads `url` (`http://[user:password@]host[:port][/]`); `variable` names it in the error.
    public init(url: String, noProxy: NoProxyRules = NoProxyRules(""), variable: String = "HTTPS_PROXY") throws(EgressProxyError) {
        func refuse(_ why: String) -> EgressProxyError { EgressProxyError(variable: variable, reason: why) }
        var rest = Substring(url.trimmingCharacters(in: .whitespaces))
        if let schemeEnd = rest.range(of: "://") {
            let scheme = rest[..<schemeEnd.lowerBound].lowercased()
            switch scheme {
            case "http": break
            case "https": throw refuse("an https:// proxy (TLS to the proxy) is not supported; name the proxy with http://")
            default: throw refuse("the proxy scheme must be http://, got \(scheme)://")
            }
            rest = rest[schemeEnd.upperBound...]
        }
        if let slash = rest.firstIndex(of: "/") {
            guard rest[slash...] == "/" else { throw refuse("a proxy URL has no path: http://[user:password@]host:port") }
            rest = rest[..<slash]
        }
        var credentials: Credentials?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let colon = userinfo.firstIndex(of: ":")
            guard let user = Self.percentDecoded(colon.map { userinfo[..<$0] } ?? userinfo),
                let password = Self.percentDecoded(colon.map { userinfo[userinfo.index(after: $0)...] } ?? "")
            else { throw refuse("the user or password has an invalid percent escape") }
            guard !user.isEmpty else { throw refuse("the proxy URL names a password without a user") }
            guard !(user + password).utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
                throw refuse("the user or password contains a control character")
            }
            credentials = Credentials(user: user, password: password)
        }
        var hostPart = rest
        var portPart: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw refuse("an IPv6 proxy address needs its closing bracket") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw refuse("expected :port after the IPv6 address") }
                portPart = after.dropFirst()
            }
            guard IPLiteral.bytes(String(hostPart)).map({ $0.count == 16 }) == true else { throw refuse("not an IPv6 address in brackets") }
        } else if let colon = rest.firstIndex(of: ":") {
            hostPart = rest[..<colon]
            portPart = rest[rest.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw refuse("the proxy URL has no host: http://[user:password@]host:port") }
        guard rest.hasPrefix("[") || hostPart.utf8.allSatisfy(Self.isHostByte) else {
            throw refuse("the proxy host may hold letters, digits, '-', '.' and '_' only")
        }
        var port = Self.defaultPort
        if let portPart {
            guard let number = Int(portPart), (1...65_535).contains(number), portPart.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                throw refuse("the proxy port must be 1-65535")
            }
            port = number
        }
        host = hostPart.lowercased()
        self.port = port
        self.credentials = credentials
        self.noProxy = noProxy
    }

    /// The proxy `lookup` names (`https_proxy`, else `HTTPS_PROXY`; empty is unset), with `no_proxy`/`NO_PROXY`; nil when none.
    public static func fromEnvironment(_ lookup: (String) -> String?) throws(EgressProxyError) -> EgressProxy? {
        func value(_ names: [String]) -> (name: String, value: String)? {
            for name in names {
                if let text = lookup(name)?.trimmingCharacters(in: .whitespaces), !text.isEmpty { return (name, text) }
            }
            return nil
        }
        guard let proxy = value(proxyVariables) else { return nil }
        return try EgressProxy(url: proxy.value, noProxy: NoProxyRules(value(noProxyVariables)?.value ?? ""), variable: proxy.name)
    }

    /// Whether requests to `host` (lower case, IPv6 without brackets) go through the proxy: every host `NO_PROXY` does not match.
    public func applies(to host: String) -> Bool { !noProxy.matches(host) }

    /// `host:port`, an IPv6 literal in brackets: what logs and errors name (never the credentials).
    public var authority: String { Self.authority(host, port) }

    public var hasCredentials: Bool { credentials != nil }

    /// `http://[***@]host:port`.
    public var description: String { "http://\(credentials == nil ? "" : "***@")\(authority)" }

    /// The `Proxy-Authorization` value (RFC 9110 §11.7.1, Basic: RFC 7617), nil without credentials.
    var proxyAuthorization: String? {
        credentials.map { "Basic " + Data("\($0.user):\($0.password)".utf8).base64EncodedString() }
    }

    /// `http://host:port` for libcurl's `CURLOPT_PROXY`; the credentials go apart (`CURLOPT_PROXYUSERNAME`/`PASSWORD`).
    var curlProxyURL: String { "http://\(authority)" }
    var user: String? { credentials?.user }
    var password: String? { credentials?.password }

    static func authority(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    private static func isHostByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    /// RFC 3986 §2.1 percent-decoding; nil for a `%` not followed by two hex digits or bytes that are not UTF-8.
    static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - 0x30
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - 0x61 + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - 0x41 + 10
        default: nil
        }
    }
}

/// A malformed proxy variable: one line naming it, never its value (it may hold a password).
public struct EgressProxyError: Error, Sendable, Equatable, CustomStringConvertible {
    public let variable: String
    public let reason: String
    public var description: String { "\(variable) must be http://[user:password@]host:port: \(reason)" }
}

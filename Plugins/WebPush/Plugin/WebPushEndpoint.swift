import Foundation

/// A subscription endpoint read into the parts `EndpointPolicy` checks and the request is built from: an https URL with
/// a host, no credentials, the path and query as sent. Read once per target, when its details are made
/// (`WebPushTarget.parsedEndpoint`); the scope and the check of every attempt use that reading.
struct WebPushEndpoint: Equatable, Sendable {
    let host: String
    /// `host` or `host:port`, the port only when it is not 443.
    let authority: String
    let port: Int
    /// `https://host[:port]`: the VAPID audience and the scope of breakers and limits.
    let origin: String
    let pathAndQuery: String

    static func parse(_ endpoint: String) -> Result<WebPushEndpoint, EndpointRefusal> {
        do throws(EndpointRefusal) { return .success(try read(endpoint)) } catch { return .failure(error) }
    }

    private static func read(_ endpoint: String) throws(EndpointRefusal) -> WebPushEndpoint {
        guard endpoint.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else {
            throw EndpointRefusal("endpoint contains spaces or control characters")
        }
        guard let components = URLComponents(string: endpoint), let scheme = components.scheme?.lowercased() else {
            throw EndpointRefusal("endpoint is not a URL")
        }
        guard scheme == "https" else { throw EndpointRefusal("endpoint must be https") }
        guard components.user == nil, components.password == nil else { throw EndpointRefusal("endpoint must not carry credentials") }
        guard let rawHost = components.percentEncodedHost?.lowercased(), !rawHost.isEmpty, !rawHost.contains("%") else {
            throw EndpointRefusal("endpoint has no valid host")
        }
        let bracketed = rawHost.hasPrefix("[")
        let host = bracketed ? String(rawHost.dropFirst().dropLast()) : rawHost
        guard !host.isEmpty,
            host.utf8.allSatisfy({
                $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")
                    || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9"))
            })
        else { throw EndpointRefusal("endpoint has no valid host") }
        let urlHost = host.contains(":") ? "[\(host)]" : host
        let port = components.port ?? 443
        var pathAndQuery = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { pathAndQuery += "?" + query }
        // RFC 6454 §6.2: the default port is not serialized, so an explicit :443 makes the same origin (and VAPID `aud`).
        let authority = port == 443 ? urlHost : "\(urlHost):\(port)"
        return WebPushEndpoint(host: host, authority: authority, port: port, origin: "https://\(authority)", pathAndQuery: pathAndQuery)
    }
}

/// Why an endpoint is not contacted: the rule that refused it, never the address a name resolved to.
struct EndpointRefusal: Error, Equatable {
    let reason: String
    /// The endpoint may well be fine and the check could not finish (DNS): try again later.
    let retryable: Bool

    init(_ reason: String, retryable: Bool = false) {
        self.reason = reason
        self.retryable = retryable
    }
}

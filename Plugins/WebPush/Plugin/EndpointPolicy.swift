import Foundation

/// Subscription endpoints come from browsers through the upstream service: untrusted URLs.
/// Only https on an allowed port (443 unless configured), no credentials, no loopback,
/// private, link-local or otherwise special address (by IP literal, by the IPv4 address an
/// IPv6 form embeds, or by any DNS answer) outside the explicitly allowed networks,
/// optionally only allow-listed hosts. The URL handed on is rebuilt from the checked parts,
/// and the address checked is the one connected to (pinned), so DNS cannot change it in between.
/// Refusals name the rule, never the address a name resolved to.
struct EndpointPolicy: Sendable {
    struct Rules: Sendable, Equatable {
        /// Any non-public address (tests, in-house push services): `PUSH_WEBPUSH_ALLOW_PRIVATE`.
        var allowPrivateNetworks = false
        /// Non-public blocks allowed nonetheless: `PUSH_WEBPUSH_ALLOWED_NETWORKS`.
        var allowedNetworks: [IPNetwork] = []
        /// When not empty, only these hosts and their subdomains: `PUSH_WEBPUSH_ALLOWED_HOSTS`.
        var allowedHosts: [String] = []
        /// `PUSH_WEBPUSH_ALLOWED_PORTS`; push services listen on 443.
        var allowedPorts: Set<Int> = [443]
    }

    let rules: Rules
    let resolver: HostResolver

    init(_ rules: Rules, resolver: HostResolver = HostResolver()) {
        self.rules = rules
        self.resolver = resolver
    }

    struct Target: Equatable {
        /// `https://host[:port]`: the VAPID audience and the scope of breakers and limits.
        let origin: String
        let host: String
        let port: Int
        /// The URL to request, rebuilt from the parts that were checked.
        let url: String
        /// `host:port:address` for the transport, nil when no resolution was needed.
        let pinnedResolution: String?
    }

    struct Refusal: Error, Equatable {
        let reason: String
        /// The endpoint may well be fine and the check could not finish (DNS): try again later.
        let retryable: Bool
        init(_ reason: String, retryable: Bool = false) {
            self.reason = reason
            self.retryable = retryable
        }

        static let address = Refusal("endpoint host is not a public address this worker may contact")

        init(_ failure: HostResolver.Failure) {
            switch failure {
            case .timedOut: self.init("DNS lookup of the push service timed out", retryable: true)
            case .busy: self.init("DNS lookups are queued to their limit; the push service was not looked up", retryable: true)
            case .cancelled: self.init("DNS lookup of the push service was cancelled", retryable: true)
            }
        }
    }

    /// The origin of an endpoint without resolving anything, nil when it is not an https URL.
    static func origin(of endpoint: String) -> String? {
        guard case .success(let parts) = parse(endpoint) else { return nil }
        return parts.origin
    }

    /// An endpoint read into the parts the rules look at and the request is built from: read once per target, when
    /// its details are made (`WebPushTarget.parsedEndpoint`), and used by the scope and the check of every attempt.
    struct Parts: Equatable, Sendable {
        let host: String
        /// `host` or `host:port`, the port only when it is not 443.
        let authority: String
        let port: Int
        let origin: String
        let pathAndQuery: String
    }

    static func parse(_ endpoint: String) -> Result<Parts, Refusal> {
        do throws(Refusal) { return .success(try parts(of: endpoint)) } catch { return .failure(error) }
    }

    private static func parts(of endpoint: String) throws(Refusal) -> Parts {
        guard endpoint.utf8.allSatisfy({ $0 > 0x20 && $0 != 0x7F }) else { throw Refusal("endpoint contains spaces or control characters") }
        guard let components = URLComponents(string: endpoint), let scheme = components.scheme?.lowercased() else {
            throw Refusal("endpoint is not a URL")
        }
        guard scheme == "https" else { throw Refusal("endpoint must be https") }
        guard components.user == nil, components.password == nil else { throw Refusal("endpoint must not carry credentials") }
        guard let rawHost = components.percentEncodedHost?.lowercased(), !rawHost.isEmpty, !rawHost.contains("%") else {
            throw Refusal("endpoint has no valid host")
        }
        let bracketed = rawHost.hasPrefix("[")
        let host = bracketed ? String(rawHost.dropFirst().dropLast()) : rawHost
        guard !host.isEmpty, host.utf8.allSatisfy({ $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "-")
            || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z")) || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) })
        else { throw Refusal("endpoint has no valid host") }
        let urlHost = host.contains(":") ? "[\(host)]" : host
        let port = components.port ?? 443
        var pathAndQuery = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        if let query = components.percentEncodedQuery { pathAndQuery += "?" + query }
        // RFC 6454 §6.2: the default port is not serialized, so an explicit :443 makes the same origin (and VAPID `aud`).
        let authority = port == 443 ? urlHost : "\(urlHost):\(port)"
        let origin = "https://\(authority)"
        return Parts(host: host, authority: authority, port: port, origin: origin, pathAndQuery: pathAndQuery)
    }

    /// Whether `endpoint` may be contacted, and where; a host name is looked up within `budget`.
    func check(_ endpoint: String, within budget: Duration = .seconds(10)) async -> Result<Target, Refusal> {
        await check(Self.parse(endpoint), within: budget)
    }

    /// Whether an endpoint already read (`parse`) may be contacted, and where.
    func check(_ parsed: Result<Parts, Refusal>, within budget: Duration = .seconds(10)) async -> Result<Target, Refusal> {
        let parts: Parts
        switch parsed {
        case .success(let read): parts = read
        case .failure(let refusal): return .failure(refusal)
        }
        guard rules.allowedPorts.contains(parts.port) else {
            return .failure(Refusal("endpoint port is not allowed (PUSH_WEBPUSH_ALLOWED_PORTS)"))
        }
        let host = parts.host
        if !rules.allowedHosts.isEmpty, !rules.allowedHosts.contains(where: { host == $0 || host.hasSuffix("." + $0) }) {
            return .failure(Refusal("endpoint host is not in PUSH_WEBPUSH_ALLOWED_HOSTS"))
        }
        let url = "https://\(parts.authority)\(parts.pathAndQuery)"
        if let literal = IPAddress(host) {
            guard allows(literal) else { return .failure(.address) }
            return .success(Target(origin: parts.origin, host: host, port: parts.port, url: url, pinnedResolution: nil))
        }
        let addresses: [IPAddress]
        switch await resolver.resolve(host, timeout: budget) {
        case .success(let found): addresses = found
        case .failure(let failure): return .failure(Refusal(failure))
        }
        guard let first = addresses.first, addresses.allSatisfy(allows) else { return .failure(.address) }
        let pinned = first.isV6 ? "[\(first.text)]" : first.text
        return .success(Target(origin: parts.origin, host: host, port: parts.port, url: url,
                               pinnedResolution: "\(host):\(parts.port):\(pinned)"))
    }

    func allows(_ address: IPAddress) -> Bool {
        address.isPublic || rules.allowPrivateNetworks || rules.allowedNetworks.contains { $0.contains(address) }
    }
}

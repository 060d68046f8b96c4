import Foundation
import PushHTTP

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
        /// The network's own NAT64 prefixes: addresses under them are judged by the IPv4 address they embed.
        var nat64Prefixes: [NAT64Prefix] = []
        /// The egress proxy that resolves endpoint hosts itself (`PUSH_WEBPUSH_RESOLVE_VIA_PROXY`): a name it applies to
        /// is not looked up here, and the request goes only through it. nil: every name is resolved and checked here, and
        /// a proxied request tunnels to the checked address.
        var resolvingProxy: EgressProxy?
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
        /// The name was not resolved here: the egress proxy resolves it (`Rules.resolvingProxy`).
        var resolvedByProxy = false
    }

    typealias Refusal = EndpointRefusal
    typealias Parts = WebPushEndpoint

    /// The origin of an endpoint without resolving anything, nil when it is not an https URL.
    static func origin(of endpoint: String) -> String? {
        guard case .success(let parts) = WebPushEndpoint.parse(endpoint) else { return nil }
        return parts.origin
    }

    static func parse(_ endpoint: String) -> Result<Parts, Refusal> { WebPushEndpoint.parse(endpoint) }

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
        if let proxy = rules.resolvingProxy, proxy.applies(to: host) {
            return .success(
                Target(origin: parts.origin, host: host, port: parts.port, url: url, pinnedResolution: nil, resolvedByProxy: true))
        }
        let addresses: [IPAddress]
        switch await resolver.resolve(host, timeout: budget) {
        case .success(let found): addresses = found
        case .failure(let failure): return .failure(Refusal(failure))
        }
        guard let first = addresses.first else { return .failure(.noSuchHost) }
        guard addresses.allSatisfy(allows) else { return .failure(.address) }
        let pinned = first.isV6 ? "[\(first.text)]" : first.text
        return .success(
            Target(
                origin: parts.origin, host: host, port: parts.port, url: url,
                pinnedResolution: "\(host):\(parts.port):\(pinned)"))
    }

    func allows(_ address: IPAddress) -> Bool {
        address.isPublic(nat64: rules.nat64Prefixes) || rules.allowPrivateNetworks
            || rules.allowedNetworks.contains { $0.contains(address, nat64: rules.nat64Prefixes) }
    }
}

extension EndpointRefusal {
    static let address = EndpointRefusal("endpoint host is not a public address this worker may contact")
    /// The push service's name does not exist (an answer, unlike a failed lookup): trying again will not help.
    static let noSuchHost = EndpointRefusal("endpoint host does not resolve (no such name)")

    init(_ failure: HostResolver.Failure) {
        switch failure {
        case .timedOut: self.init("DNS lookup of the push service timed out", retryable: true)
        case .busy: self.init("DNS lookups are queued to their limit; the push service was not looked up", retryable: true)
        case .cancelled: self.init("DNS lookup of the push service was cancelled", retryable: true)
        case .lookupFailed(let reason): self.init("DNS lookup of the push service failed for now: \(reason)", retryable: true)
        }
    }
}

import PushCrypto
import PushHTTP

public struct WebPushConfiguration: Sendable {
    /// The application server's VAPID key (P-256): targets without `app`, or whose app has no key of its own.
    public var vapidKey: PrivateKey
    /// `sub` of the VAPID token: a `mailto:` or `https:` contact.
    public var subject: String
    /// VAPID identities by the targets' `app` (tenants, key rotation): a subscription is tied to the key its page
    /// subscribed with, so each app's targets are signed with that app's key.
    public var apps: [String: VAPIDIdentity] = [:]
    /// Trust for push services (a sandbox CA); nil = the system store. Read once, with the
    /// configuration (`CredentialFile`): the init reads the path it is given; a plugin sets the file it checked.
    public var caFile: CredentialFile?
    /// Allow endpoints on any loopback, private and link-local address (tests, private push services).
    public var allowPrivateNetworks: Bool
    /// Non-public networks endpoints may use nonetheless (an in-house push service), e.g. `10.20.0.0/16`.
    public var allowedNetworks: [IPNetwork]
    /// When not empty, only endpoints whose host equals or ends with one of these (after a dot).
    public var allowedHosts: [String]
    /// Ports endpoints may name; push services listen on 443.
    public var allowedPorts: Set<Int>
    /// The network's own NAT64 prefixes (`PUSH_WEBPUSH_NAT64_PREFIXES`), beside the well-known `64:ff9b::/96`.
    public var nat64Prefixes: [NAT64Prefix] = []
    /// Requests in flight per push-service origin, so one slow or hostile push service holds a bounded share.
    public var maximumInFlightPerOrigin: Int
    /// The budget of one attempt: the DNS lookup of the endpoint's host and then the request share it.
    public var timeout: Duration
    /// The longest one DNS lookup of a push-service host may take (`PUSH_WEBPUSH_DNS_TIMEOUT_MS`); a lookup that
    /// takes longer is a retryable failure of that origin.
    public var dnsTimeout: Duration
    /// Lifetime of a VAPID token: RFC 8292 allows at most 24 h from the request, so a longer one is cut to 24 h less
    /// a 10-minute margin for a push service whose clock is behind ours (`VAPIDTokens.longestLifetime`).
    public var tokenLifetime: Duration
    /// The egress proxy the worker's transports use (`HTTPS_PROXY`, `NO_PROXY`): with `resolveViaProxy`, the endpoint hosts
    /// it applies to are resolved by the proxy, not here.
    public var egressProxy: EgressProxy?
    /// `PUSH_WEBPUSH_RESOLVE_VIA_PROXY`: behind the proxy, `CONNECT host:443` instead of a tunnel to the address checked
    /// here; the private-address guard is then the proxy's.
    public var resolveViaProxy = false

    public init(
        vapidKey: PrivateKey, subject: String, caFile: String? = nil, allowPrivateNetworks: Bool = false,
        allowedNetworks: [IPNetwork] = [], allowedHosts: [String] = [], allowedPorts: Set<Int> = [443],
        maximumInFlightPerOrigin: Int = 100, timeout: Duration = .seconds(10), dnsTimeout: Duration = .seconds(5),
        tokenLifetime: Duration = .seconds(12 * 3600)
    ) {
        self.vapidKey = vapidKey
        self.subject = subject
        self.caFile = caFile.map { CredentialFile(reading: $0) }
        self.allowPrivateNetworks = allowPrivateNetworks
        self.allowedNetworks = allowedNetworks
        self.allowedHosts = allowedHosts
        self.allowedPorts = allowedPorts
        self.maximumInFlightPerOrigin = maximumInFlightPerOrigin
        self.timeout = timeout
        self.dnsTimeout = dnsTimeout
        self.tokenLifetime = tokenLifetime
    }
}

/// An application server's VAPID key and contact.
public struct VAPIDIdentity: Sendable {
    public var key: PrivateKey
    public var subject: String

    public init(key: PrivateKey, subject: String) {
        self.key = key
        self.subject = subject
    }
}

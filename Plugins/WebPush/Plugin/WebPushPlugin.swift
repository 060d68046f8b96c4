import PushCore
import PushCrypto
import PushHTTP
import PushPluginAPI

/// Web Push (RFC 8030, 8291, 8292) to browsers' push services; the endpoints are untrusted URLs.
public struct WebPushPlugin: ProviderPlugin {
    public let id = ProviderID.webpush
    public var targetFormat: any TargetFormat { WebPushTargetFormat() }
    public var templateShape: (any TemplateShape)? { WebPushTemplateShape() }
    public var appsFileSection: String? { "webpush" }
    public var configuredBy: String { "PUSH_WEBPUSH_VAPID_KEY_FILE" }

    public init() {}

    enum Settings {
        static let vapidKeyFile = Setting(
            "PUSH_WEBPUSH_VAPID_KEY_FILE", .file,
            "Web Push: the VAPID P-256 private key, PEM or a base64url raw key (`push-worker vapid-keys` makes one).")
        static let vapidSubject = Setting(
            "PUSH_WEBPUSH_VAPID_SUBJECT",
            "`sub` of the VAPID token: a `mailto:` or `https:` contact on a public host (required with the key). `localhost`, `.localhost`, `.invalid`, `.test` and `.local` hosts are refused: Apple's push service answers 403 BadJwtToken to them."
        )
        static let caFile = Setting(
            "PUSH_WEBPUSH_CA_FILE", .file, "PEM CA bundle trusted for push services instead of the system store (sandboxes).")
        static let allowPrivate = Setting(
            "PUSH_WEBPUSH_ALLOW_PRIVATE", .boolean, default: "false",
            "Allow subscription endpoints on loopback, private and link-local addresses (tests, in-house push services).")
        static let allowedHosts = Setting(
            "PUSH_WEBPUSH_ALLOWED_HOSTS", .list,
            "Comma-separated push-service hosts; when set, only endpoints on these hosts or their subdomains are contacted.")
        static let allowedNetworks = Setting(
            "PUSH_WEBPUSH_ALLOWED_NETWORKS", .list,
            "Comma-separated CIDR blocks (`10.20.0.0/16`, `fd00:1::/64`) that endpoints may use although they are not public (an in-house push service); narrower than `PUSH_WEBPUSH_ALLOW_PRIVATE`."
        )
        static let nat64Prefixes = Setting(
            "PUSH_WEBPUSH_NAT64_PREFIXES", .list,
            "Comma-separated NAT64 prefixes of an IPv6-only cluster's own DNS64 (RFC 6052: /32, /40, /48, /56, /64 or /96); an endpoint address under one is judged by the IPv4 address it embeds, as under the well-known `64:ff9b::/96`."
        )
        static let allowedPorts = Setting(
            "PUSH_WEBPUSH_ALLOWED_PORTS", .list, default: "443",
            "Comma-separated ports subscription endpoints may name; any other port is refused.")
        static let maximumInFlightPerOrigin = Setting(
            "PUSH_WEBPUSH_MAX_IN_FLIGHT_PER_ORIGIN", .integer(1...100_000), default: "100",
            "Web Push requests in flight per push-service origin: one slow or hostile push service holds at most this many (its circuit breaker is per origin too)."
        )
        static let dnsTimeoutMs = Setting(
            "PUSH_WEBPUSH_DNS_TIMEOUT_MS", .integer(100...60_000), default: "5000",
            "Web Push: the longest a DNS lookup of a push-service host may take, within the attempt's request timeout; a lookup that takes longer is a retryable failure of that origin. The resolver's limits and cache are in docs/operations.md."
        )
        static let resolveViaProxy = Setting(
            "PUSH_WEBPUSH_RESOLVE_VIA_PROXY", .boolean, default: "false",
            "Behind an egress proxy (`HTTPS_PROXY`, for endpoint hosts `NO_PROXY` does not exclude): send `CONNECT <host>:443` and let the proxy resolve the name, instead of resolving and checking the address here and tunnelling to that address. The guard against private addresses then rests on the proxy's own ACLs ([egress proxy](egress-proxy.md))."
        )
        static let dependents = [
            vapidSubject, caFile, allowPrivate, allowedHosts, allowedNetworks, nat64Prefixes, allowedPorts, maximumInFlightPerOrigin,
            dnsTimeoutMs, resolveViaProxy,
        ]
    }

    public var settings: [Setting] { [Settings.vapidKeyFile] + Settings.dependents }

    public func configure(_ reader: inout SettingsReader, apps entries: [JSONValue]) -> ConfiguredPlugin? {
        guard let configuration = Self.configuration(&reader, apps: entries) else { return nil }
        let publicKey = (try? configuration.vapidKey.rawPublicKey()).map(Base64URL.encode) ?? "?"
        return ConfiguredPlugin(
            id: id, configuration: configuration,
            summary: [
                "webpush: VAPID public key \(publicKey), subject \(configuration.subject), ports \(configuration.allowedPorts.sorted().map(String.init).joined(separator: ","))"
                    + (configuration.allowPrivateNetworks ? ", private networks allowed" : "")
            ], appLabels: Set(configuration.apps.keys),
            check: { _ in WebPushCredentialCheck.run(configuration) }
        ) { context in
            try WebPushProvider(configuration: configuration, transport: context.makeTransport("webpush"), templates: context.templates)
        }
    }

    /// The VAPID key, each app's own (`PUSH_APPS_FILE` `{"webpush": [{"app", "vapidKeyFile", "subject"?}]}`) and the
    /// endpoint policy.
    public static func configuration(_ reader: inout SettingsReader, apps entries: [JSONValue] = []) -> WebPushConfiguration? {
        guard let path = reader.string(Settings.vapidKeyFile) else {
            reader.refuseDependents(Settings.dependents, because: "PUSH_WEBPUSH_VAPID_KEY_FILE is not")
            if !entries.isEmpty {
                reader.problem(
                    "PUSH_APPS_FILE webpush needs PUSH_WEBPUSH_VAPID_KEY_FILE too: the key of targets without an app of their own")
            }
            return nil
        }
        let key: PrivateKey
        do {
            key = try VAPIDKeyFile.load(path)
        } catch {
            reader.problem("PUSH_WEBPUSH_VAPID_KEY_FILE: \(error)")
            return nil
        }
        guard let subject = reader.string(Settings.vapidSubject) else {
            reader.problem("PUSH_WEBPUSH_VAPID_SUBJECT is required with a VAPID key: a mailto: or https: contact for push services")
            return nil
        }
        if let problem = VAPIDSubject.problem(subject) {
            reader.problem("PUSH_WEBPUSH_VAPID_SUBJECT \"\(subject)\": \(problem)")
            return nil
        }
        var networks: [IPNetwork] = []
        for text in reader.list(Settings.allowedNetworks) {
            guard let network = IPNetwork(text) else {
                reader.problem("PUSH_WEBPUSH_ALLOWED_NETWORKS: \"\(text)\" is not a CIDR block such as 10.20.0.0/16 or fd00::/8")
                continue
            }
            networks.append(network)
        }
        var prefixes: [NAT64Prefix] = []
        for text in reader.list(Settings.nat64Prefixes) {
            guard let prefix = NAT64Prefix(text) else {
                reader.problem(
                    "PUSH_WEBPUSH_NAT64_PREFIXES: \"\(text)\" is not a NAT64 prefix: an IPv6 CIDR block of length 32, 40, 48, 56, 64 or 96 (RFC 6052)"
                )
                continue
            }
            prefixes.append(prefix)
        }
        var ports: Set<Int> = []
        for text in reader.list(Settings.allowedPorts) {
            guard let port = Int(text), (1...65_535).contains(port) else {
                reader.problem("PUSH_WEBPUSH_ALLOWED_PORTS: \"\(text)\" is not a port (1-65535)")
                continue
            }
            ports.insert(port)
        }
        var apps: [String: VAPIDIdentity] = [:]
        for (index, entry) in entries.enumerated() {
            let place = "PUSH_APPS_FILE webpush[\(index)]"
            guard let app = entry.nonEmptyString("app"), let file = entry.nonEmptyString("vapidKeyFile") else {
                reader.problem("\(place): app and vapidKeyFile are required")
                continue
            }
            let appSubject = entry.nonEmptyString("subject") ?? subject
            if let problem = VAPIDSubject.problem(appSubject) {
                reader.problem("\(place) (\(app)): subject \"\(appSubject)\": \(problem)")
                continue
            }
            do {
                let identity = VAPIDIdentity(key: try VAPIDKeyFile.load(file), subject: appSubject)
                if apps.updateValue(identity, forKey: app) != nil { reader.problem("Web Push app \(app) is configured twice") }
            } catch {
                reader.problem("\(place) (\(app)): vapidKeyFile: \(error)")
            }
        }
        var configuration = WebPushConfiguration(
            vapidKey: key, subject: subject,
            allowPrivateNetworks: reader.boolean(Settings.allowPrivate),
            allowedNetworks: networks, allowedHosts: reader.list(Settings.allowedHosts).map { $0.lowercased() },
            allowedPorts: ports.isEmpty ? [443] : ports,
            maximumInFlightPerOrigin: reader.integer(Settings.maximumInFlightPerOrigin),
            dnsTimeout: .milliseconds(reader.integer(Settings.dnsTimeoutMs)))
        configuration.caFile = CredentialFiles.certificateAuthority(Settings.caFile, reader: &reader)
        configuration.apps = apps
        configuration.nat64Prefixes = prefixes
        configuration.resolveViaProxy = reader.boolean(Settings.resolveViaProxy)
        // The worker refuses a malformed HTTPS_PROXY at start-up; here it only decides which hosts are not resolved.
        configuration.egressProxy = try? EgressProxy.fromEnvironment { reader.string($0) }
        return configuration
    }
}

import Foundation
import PushCore
import PushHTTP
import PushPluginAPI

/// The customer's push proxy (BlackBerry Spark push-proxy protocol 0.2).
public struct ProxyPlugin: ProviderPlugin {
    public let id = ProviderID.proxy
    public var targetFormat: any TargetFormat { ProxyTargetFormat() }
    public var appsFileSection: String? { "proxy" }
    public var configuredBy: String { "PUSH_PROXY_URL or a proxy section in PUSH_APPS_FILE" }

    public init() {}

    enum Settings {
        static let url = Setting(
            "PUSH_PROXY_URL",
            "Push-proxy endpoint (https): serves proxy targets without `app` and apps without a proxy of their own in `PUSH_APPS_FILE`.")
        static let caFile = Setting("PUSH_PROXY_CA_FILE", .file, "PEM CA bundle trusted for the proxy instead of the system store.")
        static let certificateFile = Setting("PUSH_PROXY_CERT_FILE", .file, "PEM client certificate for mutual TLS with the proxy.")
        static let keyFile = Setting("PUSH_PROXY_KEY_FILE", .file, "PEM private key of `PUSH_PROXY_CERT_FILE`.")
        static let keyPasswordFile = Setting(
            "PUSH_PROXY_KEY_PASSWORD_FILE", .file,
            "File holding the password of `PUSH_PROXY_KEY_FILE`, if it has one (the seed's Private Key Password).")
        static let timeout = Setting(
            "PUSH_PROXY_TIMEOUT_MS", .integer(100...300_000), default: "10000", "Per-request timeout for the proxy.")
        static let dependents = [caFile, certificateFile, keyFile, keyPasswordFile]
    }

    public var settings: [Setting] { [Settings.url] + Settings.dependents + [Settings.timeout] }

    public func configure(_ reader: inout SettingsReader, apps entries: [JSONValue]) -> ConfiguredPlugin? {
        guard let configuration = Self.configuration(&reader, apps: entries) else { return nil }
        let endpoints = (configuration.defaultEndpoint.map { [("default", $0)] } ?? []) + configuration.endpoints.sorted { $0.key < $1.key }
        return ConfiguredPlugin(
            id: id, configuration: configuration, summary: endpoints.map { "proxy \($0.0): \(Redaction.url($0.1.url))" },
            // The default proxy serves any app name a job gives; only the apps with a proxy of their own are labels.
            appLabels: Set(configuration.endpoints.keys),
            requestTimeout: endpoints.map(\.1.timeout).max() ?? .seconds(10),
            check: { await ProxyCredentialCheck.run(endpoints, context: $0) }
        ) { context in
            ProxyProvider(configuration: configuration, transport: context.makeTransport("proxy"))
        }
    }

    /// The default proxy from `PUSH_PROXY_*` and one proxy per app from `PUSH_APPS_FILE`:
    /// `{"proxy": [{"app": "acme", "url": "https://…", "caFile"?, "certificateFile"?, "privateKeyFile"?, "passwordFile"?}]}`.
    public static func configuration(_ reader: inout SettingsReader, apps entries: [JSONValue] = []) -> ProxyConfiguration? {
        let timeout = Duration.milliseconds(reader.integer(Settings.timeout))
        var defaultEndpoint: ProxyEndpoint?
        if reader.isSet(Settings.url) {
            // A bad URL is a start-up problem; the proxy still counts as configured, so it is the only line.
            var url = ""
            if let text = reader.string(Settings.url), ProxyURL.carriesCredentials(text) {
                reader.problem(
                    "\(Settings.url.name) \(ProxyURL.credentialsRefused): \(Settings.certificateFile.name) and \(Settings.keyFile.name), the key's password in \(Settings.keyPasswordFile.name)"
                )
            } else {
                url = reader.httpsURL(Settings.url, isBase: false) ?? reader.string(Settings.url) ?? ""
            }
            let problemsBefore = reader.problems.count
            var tls = TLSOptions(
                caFile: CredentialFiles.tlsFile(Settings.caFile, reader: &reader),
                clientCertificateFile: CredentialFiles.tlsFile(Settings.certificateFile, reader: &reader),
                clientKeyFile: CredentialFiles.tlsFile(Settings.keyFile, reader: &reader))
            if reader.isSet(Settings.certificateFile) != reader.isSet(Settings.keyFile) {
                reader.problem("PUSH_PROXY_CERT_FILE and PUSH_PROXY_KEY_FILE must be set together")
            }
            if let path = reader.string(Settings.keyPasswordFile) {
                tls.clientKeyPassword = CredentialFiles.secret(at: path, place: Settings.keyPasswordFile.name, reader: &reader)
            }
            if reader.problems.count == problemsBefore {
                let files = [Settings.caFile, Settings.certificateFile, Settings.keyFile].filter { reader.isSet($0) }
                _ = CredentialFiles.tls(tls, place: files.map(\.name).joined(separator: ", "), reader: &reader)
            }
            defaultEndpoint = ProxyEndpoint(url: url, tls: tls, timeout: timeout)
        } else {
            reader.refuseDependents(Settings.dependents, because: "PUSH_PROXY_URL is not")
        }
        var endpoints: [String: ProxyEndpoint] = [:]
        for (index, entry) in entries.enumerated() {
            let place = "PUSH_APPS_FILE proxy[\(index)]"
            guard let app = entry.nonEmptyString("app") else {
                reader.problem("\(place): app (the targets' app this proxy serves) is required")
                continue
            }
            guard let endpoint = endpoint(entry, at: "\(place) (\(app))", timeout: timeout, reader: &reader) else { continue }
            if endpoints.updateValue(endpoint, forKey: app) != nil { reader.problem("push proxy for app \(app) is configured twice") }
        }
        guard defaultEndpoint != nil || !endpoints.isEmpty else {
            reader.refuseDependents([Settings.timeout], because: "no push proxy is configured")
            return nil
        }
        return ProxyConfiguration(defaultEndpoint: defaultEndpoint, endpoints: endpoints)
    }

    private static func endpoint(_ entry: JSONValue, at place: String, timeout: Duration, reader: inout SettingsReader) -> ProxyEndpoint? {
        if let url = entry.nonEmptyString("url"), ProxyURL.carriesCredentials(url) {
            reader.problem(
                "\(place): url \(ProxyURL.credentialsRefused): certificateFile and privateKeyFile, the key's password in passwordFile")
            return nil
        }
        guard let url = entry.nonEmptyString("url"), let parsed = URL(string: url), parsed.scheme == "https", parsed.host != nil else {
            reader.problem("\(place): url must be an https:// URL")
            return nil
        }
        var tls = TLSOptions()
        for (member, keyPath) in [
            ("caFile", \TLSOptions.caFile), ("certificateFile", \.clientCertificateFile), ("privateKeyFile", \.clientKeyFile),
        ] {
            guard let path = entry.nonEmptyString(member) else { continue }
            // Read once, with this version: the connections use these bytes, and the identity is their digest.
            let file = CredentialFile(reading: path)
            if let problem = file.problem {
                reader.problem("\(place): \(member) \(problem)")
                return nil
            }
            tls[keyPath: keyPath] = file
        }
        if (tls.clientCertificateFile == nil) != (tls.clientKeyFile == nil) {
            reader.problem("\(place): certificateFile and privateKeyFile must be given together")
            return nil
        }
        if let passwordFile = entry.nonEmptyString("passwordFile") {
            guard let password = CredentialFiles.secret(at: passwordFile, place: "\(place): passwordFile", reader: &reader) else {
                return nil
            }
            tls.clientKeyPassword = password
        }
        guard CredentialFiles.tls(tls, place: place, reader: &reader) else { return nil }
        return ProxyEndpoint(url: url, tls: tls, timeout: timeout)
    }
}

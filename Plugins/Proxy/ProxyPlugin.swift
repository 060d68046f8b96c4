import Foundation
import PushCore
import PushHTTP
import PushPluginAPI

/// The customer's push proxy (BlackBerry Spark push-proxy protocol 0.2).
public struct ProxyPlugin: ProviderPlugin {
    public let id = ProviderID.proxy
    public var targetFormat: any TargetFormat { ProxyTargetFormat() }
    public var configuredBy: String { "PUSH_PROXY_URL" }

    public init() {}

    enum Settings {
        static let url = Setting("PUSH_PROXY_URL", "Push-proxy endpoint (https). Enables the proxy plugin for every proxy target.")
        static let caFile = Setting("PUSH_PROXY_CA_FILE", .file, "PEM CA bundle trusted for the proxy instead of the system store.")
        static let certificateFile = Setting("PUSH_PROXY_CERT_FILE", .file, "PEM client certificate for mutual TLS with the proxy.")
        static let keyFile = Setting("PUSH_PROXY_KEY_FILE", .file, "PEM private key of `PUSH_PROXY_CERT_FILE`.")
        static let timeout = Setting("PUSH_PROXY_TIMEOUT_MS", .integer(100...300_000), default: "10000", "Per-request timeout for the proxy.")
    }

    public var settings: [Setting] { [Settings.url, Settings.caFile, Settings.certificateFile, Settings.keyFile, Settings.timeout] }

    public func configure(_ reader: inout SettingsReader, apps entries: [JSONValue]) -> ConfiguredPlugin? {
        guard let configuration = Self.configuration(&reader) else { return nil }
        return ConfiguredPlugin(id: id, configuration: configuration, summary: ["proxy: \(configuration.url)"],
                                endpoints: [.init(name: "push proxy \(configuration.url)", url: configuration.url, tls: configuration.tls)]) { context in
            ProxyProvider(configuration: configuration, transport: context.makeTransport("proxy"))
        }
    }

    public static func configuration(_ reader: inout SettingsReader) -> ProxyConfiguration? {
        guard reader.isSet(Settings.url) else {
            reader.refuseDependents([Settings.caFile, Settings.certificateFile, Settings.keyFile, Settings.timeout],
                                    because: "PUSH_PROXY_URL is not")
            return nil
        }
        // A bad URL is a start-up problem; the plugin still counts as configured, so it is the only line.
        let url = reader.httpsURL(Settings.url, isBase: false) ?? reader.string(Settings.url) ?? ""
        let tls = TLSOptions(caFile: reader.readableFile(Settings.caFile),
                             clientCertificateFile: reader.readableFile(Settings.certificateFile),
                             clientKeyFile: reader.readableFile(Settings.keyFile))
        if reader.isSet(Settings.certificateFile) != reader.isSet(Settings.keyFile) {
            reader.problem("PUSH_PROXY_CERT_FILE and PUSH_PROXY_KEY_FILE must be set together")
        }
        return ProxyConfiguration(url: url, tls: tls, timeout: .milliseconds(reader.integer(Settings.timeout)))
    }
}

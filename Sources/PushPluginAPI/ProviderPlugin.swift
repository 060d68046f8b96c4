import Foundation
import Logging
import PushCore
import PushCrypto
import PushHTTP

/// Everything the worker knows about a provider, given by its plugin: how jobs write its targets,
/// what its templates must render, its `PUSH_*` settings and `PUSH_APPS_FILE` section, and how to
/// build the `PushProvider` that delivers to it. The worker links a list of these
/// (`LinkedPlugins`) and loops over it; nothing outside the plugin names the provider.
public protocol ProviderPlugin: Sendable {
    var id: ProviderID { get }
    var targetFormat: any TargetFormat { get }
    /// What its operator templates must render; nil: the provider has no templates.
    var templateShape: (any TemplateShape)? { get }
    /// Its variables, each declared once: the configuration reference, `--help` and the
    /// unknown-variable check are generated from them.
    var settings: [Setting] { get }
    /// The `PUSH_APPS_FILE` section it reads (an array of app entries), if any.
    var appsFileSection: String? { get }
    /// What configures it, for the start-up refusal when `PUSH_PROVIDERS` names it unconfigured.
    var configuredBy: String { get }

    /// Reads its settings and its `PUSH_APPS_FILE` entries. nil when nothing configures the provider
    /// (then a setting that depends on the missing ones is a problem). Each problem is one line on `reader`.
    func configure(_ reader: inout SettingsReader, apps: [JSONValue]) -> ConfiguredPlugin?
}

extension ProviderPlugin {
    public var templateShape: (any TemplateShape)? { nil }
    public var appsFileSection: String? { nil }
}

/// A plugin with its configuration read: what start-up logs and `check-config` print about it, and
/// how to build its provider.
public struct ConfiguredPlugin: Sendable {
    public let id: ProviderID
    /// The plugin's typed configuration (for its tests and tools).
    public let configuration: any Sendable
    /// What start-up logs say about it: the apps and credentials it will use, no secrets.
    public let summary: [String]
    /// The `app` label values its metrics may carry: the apps its configuration names, as targets'
    /// `app` and its scopes' `metricLabel` write them. Any other name a job gives is labelled
    /// `unconfigured` (`PushPipeline.MetricAppLabels`): job producers never choose a label.
    public let appLabels: Set<String>
    /// The longest one request to this provider may take: the worker's attempt timeout is the largest among the
    /// enabled providers, and a retry's lease must outlast it.
    public let requestTimeout: Duration
    private let make: @Sendable (ProviderContext) throws -> any PushProvider
    private let checkCredentials: @Sendable (CredentialCheckContext) async -> [CheckResult]

    public init(
        id: ProviderID, configuration: any Sendable, summary: [String],
        appLabels: Set<String> = [], requestTimeout: Duration = .seconds(10),
        check: @escaping @Sendable (CredentialCheckContext) async -> [CheckResult],
        make: @escaping @Sendable (ProviderContext) throws -> any PushProvider
    ) {
        self.id = id
        self.configuration = configuration
        self.summary = summary
        self.appLabels = appLabels
        self.requestTimeout = requestTimeout
        self.checkCredentials = check
        self.make = make
    }

    public func makeProvider(_ context: ProviderContext) throws -> any PushProvider { try make(context) }

    /// `check-config`'s proof that the provider will take this configuration's credentials: one result per credential
    /// (an access token minted, a provider token signed, a key or certificate loaded) and, when `context.probesProvider`,
    /// one per request that shows the provider accepting them. Results come in a stable order; none shows a secret.
    public func checkCredentials(_ context: CredentialCheckContext) async -> [CheckResult] { await checkCredentials(context) }

    /// The typed configuration, for tests: `configured.configuration(as: APNsConfiguration.self)`.
    public func configuration<Configuration>(as type: Configuration.Type) -> Configuration? { configuration as? Configuration }
}

/// One line of `check-config`: what was checked, whether it passed, and what was found (never a secret: tokens,
/// keys and passwords are shortened with `Redaction` or left out).
public struct CheckResult: Sendable, Equatable, CustomStringConvertible {
    /// What was checked, e.g. `fcm example-project access token`.
    public var check: String
    public var passed: Bool
    public var detail: String

    public init(check: String, passed: Bool, detail: String) {
        self.check = check
        self.passed = passed
        self.detail = detail
    }

    public static func ok(_ check: String, _ detail: String) -> CheckResult { CheckResult(check: check, passed: true, detail: detail) }
    public static func fail(_ check: String, _ detail: String) -> CheckResult { CheckResult(check: check, passed: false, detail: detail) }

    /// `ok   <check>: <detail>` or `FAIL <check>: <detail>`.
    public var description: String { "\(passed ? "ok  " : "FAIL") \(check): \(detail)" }

    /// The result of minting an OAuth2 access token (FCM, HMS): the token endpoint's grant proves the key or secret.
    public static func accessToken(
        _ check: String, endpoint: String, mint: @Sendable () async throws(AccessTokenCache.Failure) -> AccessTokenCache.Issued
    ) async -> CheckResult {
        do throws(AccessTokenCache.Failure) {
            let issued = try await mint()
            let lifetime = max(0, issued.expiresAt.subtracting(saturating: issued.obtainedAt) / 1000)
            return .ok(check, "access token minted at \(Redaction.url(endpoint)) (valid \(lifetime) s)")
        } catch {
            switch error {
            case .refused(let reason): return .fail(check, "\(Redaction.url(endpoint)): \(reason)")
            case .unavailable(let reason): return .fail(check, "\(Redaction.url(endpoint)) granted no token: \(reason)")
            }
        }
    }

    /// The result of one probe request: `judge` reads the provider's answer and says whether it shows the credential
    /// accepted (nil) or why not; a request that got no answer fails with the transport's error.
    public static func probe(
        _ check: String, _ request: HTTPRequest, over transport: any HTTPTransport,
        judge: (HTTPResponse) -> (passed: Bool, detail: String)
    ) async -> CheckResult {
        do {
            let response = try await transport.send(request)
            let verdict = judge(response)
            return CheckResult(check: check, passed: verdict.passed, detail: verdict.detail)
        } catch {
            return .fail(check, "\(Redaction.url(request.url)): no answer: \(error)")
        }
    }
}

extension CheckResult {
    /// Loads a TLS client certificate (APNs certificate auth, mutual TLS with a push proxy) as far as can be done
    /// without a handshake: a PEM certificate holds a certificate, its unencrypted PEM key parses; a PKCS#12 bundle
    /// (and an encrypted key, with its password) is read, and opened by the handshake of a probe.
    public static func clientCertificate(_ tls: TLSOptions, check: String) -> CheckResult {
        guard let certificateFile = tls.clientCertificateFile else { return .ok(check, "no client certificate") }
        let path = certificateFile.path
        guard let certificate = try? certificateFile.bytes(), !certificate.isEmpty else {
            return .fail(check, "cannot read the certificate \(certificateFile.problem.map { "\($0)" } ?? "\(path): empty")")
        }
        if tls.clientCertificateFormat == .pkcs12 {
            return .ok(check, "PKCS#12 certificate \(path) read (opened at the TLS handshake)")
        }
        guard String(decoding: certificate, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
            return .fail(check, "\(path) holds no PEM certificate")
        }
        let keyFile = tls.clientKeyFile ?? certificateFile
        guard let keyBytes = try? keyFile.bytes() else { return .fail(check, "cannot read the key \(keyFile)") }
        let key = String(decoding: keyBytes, as: UTF8.self)
        if key.contains("ENCRYPTED") {
            return .ok(check, "certificate \(path) loads; its key \(keyFile.path) is encrypted (opened at the TLS handshake)")
        }
        guard (try? PrivateKey(pem: key)) != nil else { return .fail(check, "\(keyFile.path) holds no PEM private key") }
        return .ok(check, "certificate \(path) and key \(keyFile.path) load")
    }
}

/// What `check-config` hands a plugin's credential check.
public struct CredentialCheckContext: Sendable {
    /// For the requests the check makes (token grants; the probes).
    public let transport: any HTTPTransport
    /// `--probe-providers`: also send the provider one request that proves it accepts the credential (never a push a
    /// device receives: a made-up token, or a validate-only message).
    public let probesProvider: Bool
    /// The longest one request may take.
    public let timeout: Duration

    public init(transport: any HTTPTransport, probesProvider: Bool, timeout: Duration) {
        self.transport = transport
        self.probesProvider = probesProvider
        self.timeout = timeout
    }
}

/// What a provider gets from the worker when it is built.
public struct ProviderContext: Sendable {
    /// A transport of its own (HTTP/2 connections, named in logs and metrics).
    public let makeTransport: @Sendable (_ name: String) -> any HTTPTransport
    public let templates: any PayloadTemplates
    public let logger: Logger
    /// The provider this one replaces when live configuration changed the plugin's files; nil at start-up. A provider
    /// may take over state of its predecessor that the change left valid (APNs keeps the provider token of a key
    /// whose file did not change: Apple refuses a new token within 20 minutes of the last, `TooManyProviderTokenUpdates`).
    public let predecessor: (any PushProvider)?

    public init(
        makeTransport: @escaping @Sendable (_ name: String) -> any HTTPTransport,
        templates: any PayloadTemplates = BuiltInPayloads(), logger: Logger, predecessor: (any PushProvider)? = nil
    ) {
        self.makeTransport = makeTransport
        self.templates = templates
        self.logger = logger
        self.predecessor = predecessor
    }

    /// This context for the successor of `provider`.
    public func replacing(_ provider: (any PushProvider)?) -> ProviderContext {
        ProviderContext(makeTransport: makeTransport, templates: templates, logger: logger, predecessor: provider)
    }
}

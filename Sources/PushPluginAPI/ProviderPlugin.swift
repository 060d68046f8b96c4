import Logging
import PushCore
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
    /// The fixed endpoints it talks to, which `check-config` tries to reach.
    public let endpoints: [Endpoint]
    /// The `app` label values its metrics may carry: the apps its configuration names, as targets'
    /// `app` and its scopes' `metricLabel` write them. Any other name a job gives is labelled
    /// `unconfigured` (`PushPipeline.MetricAppLabels`): job producers never choose a label.
    public let appLabels: Set<String>
    /// The longest one request to this provider may take: the worker's attempt timeout is the largest among the
    /// enabled providers, and a retry's lease must outlast it.
    public let requestTimeout: Duration
    private let make: @Sendable (ProviderContext) throws -> any PushProvider

    /// An HTTPS endpoint `check-config` reaches with a TLS handshake and one request (any HTTP status counts).
    public struct Endpoint: Sendable, Equatable {
        public var name: String
        public var url: String
        public var tls: TLSOptions

        public init(name: String, url: String, tls: TLSOptions) {
            self.name = name
            self.url = url
            self.tls = tls
        }
    }

    public init(
        id: ProviderID, configuration: any Sendable, summary: [String], endpoints: [Endpoint] = [],
        appLabels: Set<String> = [], requestTimeout: Duration = .seconds(10),
        make: @escaping @Sendable (ProviderContext) throws -> any PushProvider
    ) {
        self.id = id
        self.configuration = configuration
        self.summary = summary
        self.endpoints = endpoints
        self.appLabels = appLabels
        self.requestTimeout = requestTimeout
        self.make = make
    }

    public func makeProvider(_ context: ProviderContext) throws -> any PushProvider { try make(context) }

    /// The typed configuration, for tests: `configured.configuration(as: APNsConfiguration.self)`.
    public func configuration<Configuration>(as type: Configuration.Type) -> Configuration? { configuration as? Configuration }
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

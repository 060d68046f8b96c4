import PushCore

/// The `app` label values of the pipeline's metrics. A job producer chooses its targets' `app`, so a
/// name taken from a job never becomes a series of its own: the label is an app the worker's
/// configuration names for that provider (each plugin's `ConfiguredPlugin.appLabels`, handed over at
/// start-up and by each live reload, `PipelineMetrics.replaceAppLabels`), `-` for a target or scope without an
/// app, and `unconfigured` for every other name. The label set is the configuration's, so neither typos nor junk
/// can decide which tenants get series (issue 39).
public struct MetricAppLabels: Sendable {
    public static let unconfigured = "unconfigured"
    /// A target without `app`, or a scope that names none (a Web Push origin).
    public static let none = "-"

    private let configured: [ProviderID: Set<String>]

    /// - Parameter configured: per provider, the app names its configuration serves.
    public init(_ configured: [ProviderID: Set<String>] = [:]) {
        self.configured = configured
    }

    /// The providers this configuration serves.
    public var providers: [ProviderID] { Array(configured.keys) }

    /// Whether `label` is one this configuration gives for `provider` (an app it names, `-` or `unconfigured`).
    public func isLabel(_ label: String, of provider: ProviderID) -> Bool {
        label == Self.none || label == Self.unconfigured || configured[provider]?.contains(label) == true
    }

    public func label(_ provider: ProviderID, _ name: String?) -> String {
        guard let name, name != Self.none else { return Self.none }
        return configured[provider]?.contains(name) == true ? name : Self.unconfigured
    }
}

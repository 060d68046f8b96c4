import PushCore

/// The `app` label values of the pipeline's metrics. A job producer chooses its targets' `app`, so a
/// name taken from a job never becomes a series of its own: the label is an app the worker's
/// configuration names for that provider (each plugin's `ConfiguredPlugin.appLabels`, handed over at
/// start-up), `-` for a target or scope without an app, and `unconfigured` for every other name. The
/// label set is fixed when the worker starts, so neither typos nor junk can decide which tenants get
/// series (issue 39).
public struct MetricAppLabels: Sendable {
    public static let unconfigured = "unconfigured"
    /// A target without `app`, or a scope that names none (a Web Push origin).
    public static let none = "-"

    private let configured: [ProviderID: Set<String>]

    /// - Parameter configured: per provider, the app names its configuration serves.
    public init(_ configured: [ProviderID: Set<String>] = [:]) {
        self.configured = configured
    }

    public func label(_ provider: ProviderID, _ name: String?) -> String {
        guard let name, name != Self.none else { return Self.none }
        return configured[provider]?.contains(name) == true ? name : Self.unconfigured
    }
}

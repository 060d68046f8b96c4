/// One delivery attempt handed to a provider plugin.
public struct Delivery: Sendable {
    public let job: Job
    public let target: Target
    /// 1 for the first attempt.
    public let attempt: Int
    /// Milliseconds since the epoch when this attempt started.
    public let now: Int64
    /// Urgent deliveries (calls, cancels, the urgent lane) get HTTP/2 streams before normal ones;
    /// plugins hand it to the transport unchanged (`HTTPRequest.lane`).
    public let lane: Lane

    public init(job: Job, target: Target, attempt: Int, now: Int64, lane: Lane? = nil) {
        self.job = job
        self.target = target
        self.attempt = attempt
        self.now = now
        self.lane = lane ?? Lane(kind: job.kind)
    }

    /// Validity left to pass on to the provider (0 for now-or-never jobs).
    public var remainingTTLSeconds: Int64 { job.deadline.remainingSeconds(at: now) }

    /// The same attempt with another notification (an alert shortened to fit, `AlertFitting`).
    public func replacingNotification(_ notification: Notification?) -> Delivery {
        var job = job
        job.notification = notification
        return Delivery(job: job, target: target, attempt: attempt, now: now, lane: lane)
    }

    /// An identifier stable across attempts of this job to this binding.
    public var deliveryKey: String { "\(job.id)/\(target.bindingId)" }
}

/// A provider plugin: turns one (job, target) into a request to its provider and
/// classifies the answer. It never publishes, retries or commits; it never throws —
/// every failure is a classified `DeliveryResult`.
public protocol PushProvider: Sendable {
    var id: ProviderID { get }
    /// How jobs write this provider's targets.
    var targetFormat: any TargetFormat { get }
    func deliver(_ delivery: Delivery) async -> DeliveryResult
    /// What a failure of a delivery to `target` can stop or hold up (`DeliveryScope`).
    func scope(of target: Target) -> DeliveryScope
    /// The connection identities its requests carry (`HTTPRequest.connectionIdentity`), from its configuration: after
    /// a reload the worker closes the connections of identities no provider uses any more.
    var connectionIdentities: Set<ConnectionIdentity> { get }
    /// Releases connections and threads; called once at shutdown.
    func shutdown() async
}

extension PushProvider {
    public func shutdown() async {}

    public var connectionIdentities: Set<ConnectionIdentity> { [] }

    public func scope(of target: Target) -> DeliveryScope { .app(of: target) }
}

/// The enabled plugins by provider, and the target formats of every linked one: a job may name a
/// provider this worker links but does not run (its targets end `failed`, not dead-lettered).
public struct ProviderRegistry: Sendable {
    private var providers: [ProviderID: any PushProvider] = [:]
    public private(set) var formats: TargetFormats

    /// - Parameter formats: the linked providers' target formats; default: those of `providers`.
    public init(_ providers: [any PushProvider] = [], formats: [any TargetFormat]? = nil) {
        self.formats = TargetFormats(formats ?? providers.map(\.targetFormat))
        for provider in providers { register(provider) }
    }

    public mutating func register(_ provider: any PushProvider) {
        precondition(providers[provider.id] == nil, "two plugins registered for \(provider.id)")
        providers[provider.id] = provider
        if formats.byProvider[provider.id] == nil { formats.add(provider.targetFormat) }
    }

    public func provider(for id: ProviderID) -> (any PushProvider)? { providers[id] }

    /// The registered providers.
    public var all: [any PushProvider] { Array(providers.values) }

    public func shutdown() async {
        for provider in providers.values { await provider.shutdown() }
    }
}

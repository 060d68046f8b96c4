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
    /// The hot path: starts `delivery` with no task waiting when all it needs is one request built without waiting
    /// (build → send → classify); `completion` then runs once, with the classified answer, on the transport's thread.
    /// A plugin writes the three steps once (`RequestDelivery`), and both this and `deliver` are made of them.
    func start(_ delivery: Delivery, completion: @escaping DeliveryCompletion) -> DeliveryStart
    /// What a failure of a delivery to `target` can stop or hold up (`DeliveryScope`).
    func scope(of target: Target) -> DeliveryScope
    /// The connection identities its requests carry (`HTTPRequest.connectionIdentity`), from its configuration: after
    /// a reload the worker closes the connections of identities no provider uses any more.
    var connectionIdentities: Set<ConnectionIdentity> { get }
    /// Releases connections and threads; called once at shutdown.
    func shutdown() async
}

extension PushProvider {
    /// A plugin without the split: its deliveries are awaited (`deliver`).
    public func start(_ delivery: Delivery, completion: @escaping DeliveryCompletion) -> DeliveryStart { .needsTask }

    public func shutdown() async {}

    public var connectionIdentities: Set<ConnectionIdentity> { [] }

    public func scope(of target: Target) -> DeliveryScope { .app(of: target) }
}

/// What a delivery started with no task waiting gets (`PushProvider.start`).
public typealias DeliveryCompletion = @Sendable (DeliveryResult) -> Void

/// How `PushProvider.start` began a delivery.
public enum DeliveryStart: Sendable {
    /// Its request is on its way: the completion runs once, with the classified answer (perhaps before `start`
    /// returned); the value cancels it.
    case sent(any DeliveryInFlight)
    /// Decided without a request (the plugin refused it): the completion does not run.
    case finished(DeliveryResult)
    /// The delivery awaits something before its request (a token to fetch, a template to render, requests gathered
    /// from several deliveries): await `deliver` instead.
    case needsTask
}

/// A request started with no task waiting, until its answer.
public protocol DeliveryInFlight: Sendable {
    /// Gives the request up: its completion gets a `cancelled` failure, unless the answer came first.
    func cancel()
}

/// A request that never left (refused at once): nothing to cancel.
public struct NothingInFlight: DeliveryInFlight {
    public init() {}

    public func cancel() {}
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

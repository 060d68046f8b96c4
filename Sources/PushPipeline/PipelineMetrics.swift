import Metrics
import PushCore
import Synchronization

/// The pipeline's metrics, through swift-metrics (the worker exports them for Prometheus).
/// Label values that come from jobs (`app`) are capped per provider so hostile input
/// cannot create unbounded series.
public final class PipelineMetrics: Sendable {
    public static let maximumAppsPerProvider = 100

    private let apps = Mutex<[ProviderID: Set<String>]>([:])
    let consumed = Counter(label: "push_jobs_consumed_total")
    let publishFailures = Counter(label: "push_outcome_publish_failures_total")
    let retriesClaimed = Counter(label: "push_retries_claimed_total")
    let inFlight = Gauge(label: "push_jobs_in_flight")
    let retriesInFlight = Gauge(label: "push_retries_in_flight")
    let storeAvailable = Gauge(label: "push_store_available")
    let shedJobs = Counter(label: "push_jobs_shed_total")

    private let laneLagGauges: PerLane<Gauge>
    private let laneInFlightGauges: PerLane<Gauge>
    /// Handlers made once per label set: the factory's lookup (label validation, hashing, a lock) costs more than recording.
    private let deliveryCounters = Mutex<[DeliveryLabels: Counter]>([:])
    private let requestTimers = Mutex<[ProviderID: Timer]>([:])
    private let appLimitedCounters = Mutex<[AppLabels: Counter]>([:])

    private struct AppLabels: Hashable {
        let provider: ProviderID
        let app: String
    }

    private struct DeliveryLabels: Hashable {
        let provider: ProviderID
        let app: String?
        let status: Outcome.Status
    }

    public init() {
        laneLagGauges = PerLane(Lane.allCases) { Gauge(label: "push_lane_lag_milliseconds", dimensions: [("lane", $0.rawValue)]) }
        laneInFlightGauges = PerLane(Lane.allCases) { Gauge(label: "push_lane_in_flight", dimensions: [("lane", $0.rawValue)]) }
    }

    func invalid(_ code: JobRejection.Code) {
        Counter(label: "push_jobs_invalid_total", dimensions: [("code", code.rawValue)]).increment()
    }

    func finished(_ outcome: Outcome) {
        let labels = DeliveryLabels(provider: outcome.provider, app: outcome.app, status: outcome.status)
        if let counter = deliveryCounters.withLock({ $0[labels] }) {
            counter.increment()
            return
        }
        let counter = Counter(label: "push_deliveries_total", dimensions: [
            ("provider", outcome.provider.rawValue), ("app", app(outcome.provider, outcome.app)), ("status", outcome.status.rawValue),
        ])
        // Apps beyond the cap share the "other" series and are not kept here, so hostile input cannot grow this cache.
        if app(outcome.provider, outcome.app) == (outcome.app ?? "-") { deliveryCounters.withLock { $0[labels] = counter } }
        counter.increment()
    }

    func requestDuration(_ provider: ProviderID, nanoseconds: Int64) {
        let timer = requestTimers.withLock { timers in
            if let timer = timers[provider] { return timer }
            let timer = Timer(label: "push_provider_request_duration_seconds", dimensions: [("provider", provider.rawValue)],
                              preferredDisplayUnit: .seconds)
            timers[provider] = timer
            return timer
        }
        timer.recordNanoseconds(nanoseconds)
    }

    func retryScheduled(_ provider: ProviderID) {
        Counter(label: "push_retries_scheduled_total", dimensions: [("provider", provider.rawValue)]).increment()
    }

    func circuit(_ scope: DeliveryScope, open: Bool) {
        Gauge(label: "push_circuit_open", dimensions: [("provider", scope.provider.rawValue), ("app", app(scope.provider, scope.metricLabel))])
            .record(open ? 1 : 0)
    }

    func consumerLag(topic: String, partition: Int32, messages: Int64) {
        Gauge(label: "push_consumer_lag_messages", dimensions: [("topic", topic), ("partition", String(partition))])
            .record(Double(messages))
    }

    func appConcurrencyLimited(_ scope: DeliveryScope) {
        let labels = AppLabels(provider: scope.provider, app: scope.metricLabel)
        if let counter = appLimitedCounters.withLock({ $0[labels] }) {
            counter.increment()
            return
        }
        let app = app(scope.provider, scope.metricLabel)
        let counter = Counter(label: "push_app_concurrency_limited_total", dimensions: [("provider", scope.provider.rawValue), ("app", app)])
        // As for deliveries: only apps within the cap are kept.
        if app == scope.metricLabel { appLimitedCounters.withLock { $0[labels] = counter } }
        counter.increment()
    }

    /// Now − Kafka timestamp of the job a lane consumed last.
    func laneLag(_ lane: Lane, milliseconds: Int64) {
        laneLagGauges[lane]?.record(Double(milliseconds))
    }

    func laneInFlight(_ lane: Lane, jobs: Int) {
        laneInFlightGauges[lane]?.record(jobs)
    }

    func shed() { shedJobs.increment() }

    private func app(_ provider: ProviderID, _ name: String?) -> String {
        let name = name ?? "-"
        return apps.withLock { apps in
            if apps[provider, default: []].contains(name) { return name }
            guard apps[provider, default: []].count < Self.maximumAppsPerProvider else { return "other" }
            apps[provider, default: []].insert(name)
            return name
        }
    }
}

/// Consumer lag per partition from librdkafka's statistics JSON (`statistics.interval.ms`).
enum ConsumerLag {
    static func parse(_ statistics: [UInt8]) -> [(topic: String, partition: Int32, lag: Int64)] {
        guard let document = try? JSONParser.parse(statistics, maximumDepth: 16), case .object(let topics)? = document["topics"] else {
            return []
        }
        var lags: [(String, Int32, Int64)] = []
        for (topic, value) in topics {
            guard case .object(let partitions)? = value["partitions"] else { continue }
            for (key, partition) in partitions {
                guard let number = Int32(key), number >= 0, case .integer(let lag)? = partition["consumer_lag"], lag >= 0 else { continue }
                lags.append((topic, number, lag))
            }
        }
        return lags
    }
}

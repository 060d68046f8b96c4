import Metrics
import PushCore

/// The pipeline's metrics, through swift-metrics (the worker exports them for Prometheus).
/// The `app` label comes from the configuration, never from a job (`MetricAppLabels`), so hostile
/// input cannot create series.
public final class PipelineMetrics: Sendable {
    /// Replaced by live configuration (`replaceAppLabels`).
    private let labels: Locked<MetricAppLabels>
    private var appLabels: MetricAppLabels { labels.withLock { $0 } }
    let consumed = Counter(label: "push_jobs_consumed_total")
    let publishFailures = Counter(label: "push_outcome_publish_failures_total")
    let retriesClaimed = Counter(label: "push_retries_claimed_total")
    /// Consumed and unfinished, started or not (within the read-ahead bound).
    let inFlight = Gauge(label: "push_jobs_in_flight")
    /// Started and unfinished (within `PUSH_MAX_IN_FLIGHT`).
    let running = Gauge(label: "push_jobs_running")
    let retriesInFlight = Gauge(label: "push_retries_in_flight")
    /// The shared retry queue's entries and overdue entries, sampled by every replica's scheduler (the same values in each).
    let retryQueueEntries = Gauge(label: "push_retry_queue_entries")
    let retryQueueOverdue = Gauge(label: "push_retry_queue_overdue_entries")
    let storeAvailable = Gauge(label: "push_store_available")
    /// 1 while the replica is ready (`/readyz` answers 200: both lanes joined, the store answers, not stopping), sampled every second.
    let ready = Gauge(label: "push_worker_ready")
    let shedJobs = Counter(label: "push_jobs_shed_total")

    private let laneLagGauges: PerLane<Gauge>
    private let laneInFlightGauges: PerLane<Gauge>
    private let laneHeldBytesGauges: PerLane<Gauge>
    private let oldestUncommittedGauges: PerLane<Gauge>
    /// Handlers made once per label set: the factory's lookup (label validation, hashing, a lock) costs more than recording.
    private let deliveryCounters = Locked<[DeliveryLabels: Counter]>([:])
    private let requestTimers = Locked<[ProviderID: Timer]>([:])
    private let appLimitedCounters = Locked<[AppLabels: Counter]>([:])
    private let endpointLimitedCounters = Locked<[ProviderID: Counter]>([:])

    /// Label values, so the handler caches hold at most one entry per configured app (and `-`, `unconfigured`).
    private struct AppLabels: Hashable {
        let provider: ProviderID
        let app: String
    }

    private struct DeliveryLabels: Hashable {
        let provider: ProviderID
        let app: String
        let status: Outcome.Status
    }

    public init(appLabels: MetricAppLabels = MetricAppLabels()) {
        labels = Locked(appLabels)
        laneLagGauges = PerLane(Lane.allCases) { Gauge(label: "push_lane_lag_seconds", dimensions: [("lane", $0.rawValue)]) }
        laneInFlightGauges = PerLane(Lane.allCases) { Gauge(label: "push_lane_in_flight", dimensions: [("lane", $0.rawValue)]) }
        laneHeldBytesGauges = PerLane(Lane.allCases) { Gauge(label: "push_lane_held_bytes", dimensions: [("lane", $0.rawValue)]) }
        oldestUncommittedGauges = PerLane(Lane.allCases) {
            Gauge(label: "push_oldest_uncommitted_seconds", dimensions: [("lane", $0.rawValue)])
        }
        // Series whose label values are known up front exist from the start at 0, so that a rate over them, an
        // alert or a dashboard panel has a series before the first event rather than none.
        for code in JobRejection.Code.allCases { _ = Counter(label: "push_jobs_invalid_total", dimensions: [("code", code.rawValue)]) }
        for provider in appLabels.providers {
            _ = Counter(label: "push_retries_scheduled_total", dimensions: [("provider", provider.rawValue)])
        }
    }

    /// The apps of a new configuration: an added app gets its own label from now on, a removed one goes back to
    /// `unconfigured`, and the handlers cached for labels no longer given are dropped (the series already exported keep
    /// their counts).
    public func replaceAppLabels(_ next: MetricAppLabels) {
        labels.withLock { $0 = next }
        deliveryCounters.withLock { counters in counters = counters.filter { next.isLabel($0.key.app, of: $0.key.provider) } }
        appLimitedCounters.withLock { counters in counters = counters.filter { next.isLabel($0.key.app, of: $0.key.provider) } }
    }

    func invalid(_ code: JobRejection.Code) {
        Counter(label: "push_jobs_invalid_total", dimensions: [("code", code.rawValue)]).increment()
    }

    func finished(_ outcome: Outcome) {
        let labels = DeliveryLabels(provider: outcome.provider, app: appLabels.label(outcome.provider, outcome.app), status: outcome.status)
        deliveryCounters.withLock { counters in
            if let counter = counters[labels] { return counter }
            let counter = Counter(
                label: "push_deliveries_total",
                dimensions: [
                    ("provider", labels.provider.rawValue), ("app", labels.app), ("status", labels.status.rawValue),
                ])
            counters[labels] = counter
            return counter
        }.increment()
    }

    func requestDuration(_ provider: ProviderID, nanoseconds: Int64) {
        let timer = requestTimers.withLock { timers in
            if let timer = timers[provider] { return timer }
            let timer = Timer(
                label: "push_provider_request_duration_seconds", dimensions: [("provider", provider.rawValue)],
                preferredDisplayUnit: .seconds)
            timers[provider] = timer
            return timer
        }
        timer.recordNanoseconds(nanoseconds)
    }

    func retryScheduled(_ provider: ProviderID) {
        Counter(label: "push_retries_scheduled_total", dimensions: [("provider", provider.rawValue)]).increment()
    }

    /// The `app` label of a scope: an app the configuration names, `-` or `unconfigured` (`MetricAppLabels`).
    func appLabel(of scope: DeliveryScope) -> String { appLabels.label(scope.provider, scope.metricLabel) }

    func circuit(_ scope: DeliveryScope, open: Bool) {
        Gauge(
            label: "push_circuit_open",
            dimensions: [("provider", scope.provider.rawValue), ("app", appLabels.label(scope.provider, scope.metricLabel))]
        )
        .record(open ? 1 : 0)
    }

    func consumerLag(_ lane: Lane, topic: String, partition: Int32, messages: Int64) {
        Gauge(
            label: "push_consumer_lag_messages", dimensions: [("lane", lane.rawValue), ("topic", topic), ("partition", String(partition))]
        )
        .record(Double(messages))
    }

    func appConcurrencyLimited(_ scope: DeliveryScope) {
        let labels = AppLabels(provider: scope.provider, app: appLabels.label(scope.provider, scope.metricLabel))
        appLimitedCounters.withLock { counters in
            if let counter = counters[labels] { return counter }
            let counter = Counter(
                label: "push_app_concurrency_limited_total", dimensions: [("provider", labels.provider.rawValue), ("app", labels.app)])
            counters[labels] = counter
            return counter
        }.increment()
    }

    func endpointConcurrencyLimited(_ scope: DeliveryScope) {
        // One series per provider: providers are the registered plugins, a bounded set.
        endpointLimitedCounters.withLock { counters in
            if let counter = counters[scope.provider] { return counter }
            let counter = Counter(label: "push_endpoint_concurrency_limited_total", dimensions: [("provider", scope.provider.rawValue)])
            counters[scope.provider] = counter
            return counter
        }.increment()
    }

    /// The age of the oldest message the lane has not started, held or unread (`LaneLag`), sampled every second.
    func laneLag(_ lane: Lane, milliseconds: Int64) {
        laneLagGauges[lane]?.record(Double(milliseconds) / 1000)
    }

    func laneInFlight(_ lane: Lane, jobs: Int, bytes: Int) {
        laneInFlightGauges[lane]?.record(jobs)
        laneHeldBytesGauges[lane]?.record(bytes)
    }

    /// How long the lane's oldest uncommitted offset has waited since it was consumed (0 when every job finished):
    /// what `PUSH_IDEMPOTENCY_TTL_S` must outlast, with the time a failover takes.
    func oldestUncommitted(_ lane: Lane, consumedAt: Int64?, now: Int64) {
        let milliseconds = consumedAt.map { max(now.subtracting(saturating: $0), 0) } ?? 0
        oldestUncommittedGauges[lane]?.record(Double(milliseconds) / 1000)
    }

    func shed() { shedJobs.increment() }

    /// Records the outcome producer's latency to a broker (see `ProducerLatency`), in seconds: one gauge per
    /// percentile, since librdkafka hands out percentiles of its own window, not a histogram Prometheus could sum.
    public func producerLatency(fromStatistics statistics: [UInt8]) {
        for latency in ProducerLatency.parse(statistics) {
            let broker = [("broker", latency.broker)]
            Gauge(label: "push_kafka_produce_rtt_p50_seconds", dimensions: broker).record(latency.roundTripP50 / 1000)
            Gauge(label: "push_kafka_produce_rtt_p99_seconds", dimensions: broker).record(latency.roundTripP99 / 1000)
            Gauge(label: "push_kafka_produce_queue_p99_seconds", dimensions: broker).record(latency.queueP99 / 1000)
        }
    }

}

/// The outcome producer's latency to one broker over the last statistics interval, from
/// librdkafka's statistics JSON, in milliseconds: `rtt` is request written → answer read (the
/// broker's answer time plus the network), `int_latency` is produce call → request written
/// (`linger.ms` and the producer's own queue).
struct ProducerLatency: Equatable {
    /// The broker's node id.
    let broker: String
    let roundTripP50: Double
    let roundTripP99: Double
    let queueP99: Double

    /// One entry per broker that answered a request in the interval (bootstrap entries, with node id -1, left out).
    static func parse(_ statistics: [UInt8]) -> [ProducerLatency] {
        guard let document = try? JSONParser.parse(statistics, maximumDepth: 16), case .object(let brokers)? = document["brokers"] else {
            return []
        }
        var latencies: [ProducerLatency] = []
        for (_, broker) in brokers {
            guard case .integer(let node)? = broker["nodeid"], node >= 0,
                case .integer(let requests)? = broker["rtt"]?["cnt"], requests > 0,
                let p50 = microseconds(broker["rtt"]?["p50"]), let p99 = microseconds(broker["rtt"]?["p99"])
            else { continue }
            let queue = microseconds(broker["int_latency"]?["p99"]) ?? 0
            latencies.append(
                ProducerLatency(
                    broker: String(node), roundTripP50: p50 / 1000, roundTripP99: p99 / 1000,
                    queueP99: queue / 1000))
        }
        return latencies.sorted { $0.broker < $1.broker }
    }

    private static func microseconds(_ value: JSONValue?) -> Double? {
        guard case .integer(let count)? = value, count >= 0 else { return nil }
        return Double(count)
    }
}

/// Consumer lag per partition from librdkafka's statistics JSON (`statistics.interval.ms`). A partition whose lag
/// librdkafka does not know (-1: not consumed by this replica, revoked, no offset yet) counts 0, so a replica that
/// gave a partition up does not keep showing its last lag: across replicas, the owner's is the `max`.
enum ConsumerLag {
    static func parse(_ statistics: [UInt8]) -> [(topic: String, partition: Int32, lag: Int64)] {
        guard let document = try? JSONParser.parse(statistics, maximumDepth: 16), case .object(let topics)? = document["topics"] else {
            return []
        }
        var lags: [(String, Int32, Int64)] = []
        for (topic, value) in topics {
            guard case .object(let partitions)? = value["partitions"] else { continue }
            for (key, partition) in partitions {
                guard let number = Int32(key), number >= 0, case .integer(let lag)? = partition["consumer_lag"] else { continue }
                lags.append((topic, number, max(lag, 0)))
            }
        }
        return lags
    }
}

import Logging
import Metrics
import PushCore
import PushRedis

/// Where the worker keeps dedupe claims, idempotency records and retries: in Redis (`PUSH_REDIS_URL`), shared by
/// every replica, or else in this process's memory, which no other replica sees (a second replica sends again what
/// this one sent) and a restart forgets (its pending retries with it). Said at start-up, in a warning and in the
/// `push_store_shared` gauge (1: Redis, 0: memory), so a deployment scaled past one replica without Redis shows.
struct DeliveryState {
    let store: any DeliveryStore
    /// The shared retry queue; nil in memory, where a retry waits in its job's task.
    let retryQueue: (any RetryQueue)?

    var isShared: Bool { retryQueue != nil }

    init(_ configuration: WorkerConfiguration, logger: Logger) {
        if let url = configuration.redisURL {
            let client = RedisClient(
                url: url, connections: configuration.redisConnections, tls: configuration.redisTLS,
                logger: logger)
            store = RedisDeliveryStore(client: client, recordRetention: configuration.idempotencyRetention)
            retryQueue = RedisRetryQueue(client: client, logger: logger)
            logger.info("shared store: Redis", metadata: ["url": "\(url)"])
        } else {
            store = InMemoryDeliveryStore(recordRetention: configuration.idempotencyRetention)
            retryQueue = nil
            logger.warning(
                "PUSH_REDIS_URL is not set: dedupe, idempotency and retries are kept in memory, in this process only; run a single replica (push_store_shared 0)"
            )
        }
    }

    /// Sets `push_store_shared`: 1 with Redis, 0 in memory.
    func report(to factory: any MetricsFactory = MetricsSystem.factory) {
        Gauge(label: "push_store_shared", factory: factory).record(isShared ? 1 : 0)
    }
}

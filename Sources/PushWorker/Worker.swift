import APNsPlugin
import FCMPlugin
import WebPushPlugin
import Logging
import ProxyPlugin
import PushCore
import PushHTTP
import PushKafka
import PushPipeline
import PushRedis

/// Assembles the pipeline from a configuration: plugins, producer, consumer properties.
public struct Worker: Sendable {
    public let pipeline: DeliveryPipeline
    public let producer: KafkaProducer
    public let registry: ProviderRegistry

    public init(configuration: WorkerConfiguration, logger: Logger, observer: (any PipelineObserver)? = nil) throws {
        registry = try Self.makeRegistry(configuration, logger: logger)
        var producerProperties = KafkaProducer.defaultProperties(bootstrapServers: configuration.brokers)
        producerProperties.merge(configuration.rdkafkaProperties) { $1 }
        var consumerProperties = KafkaConsumer.defaultProperties(bootstrapServers: configuration.brokers,
                                                                 groupId: configuration.groupId)
        consumerProperties.merge(configuration.rdkafkaProperties) { $1 }
        // Producer-only properties would make the consumer refuse to start, and vice versa.
        consumerProperties = consumerProperties.filter { !Self.producerOnly.contains($0.key) }
        producerProperties = producerProperties.filter { !Self.consumerOnly.contains($0.key) }
        producer = try KafkaProducer(properties: producerProperties, logger: logger)
        let store: any DeliveryStore
        let retryQueue: (any RetryQueue)?
        if let url = configuration.redisURL {
            let client = RedisClient(url: url, connections: configuration.redisConnections)
            store = RedisDeliveryStore(client: client)
            retryQueue = RedisRetryQueue(client: client)
            logger.info("shared store: Redis", metadata: ["url": "\(url)"])
        } else {
            store = InMemoryDeliveryStore()
            retryQueue = nil
            logger.warning("PUSH_REDIS_URL is not set: dedupe, idempotency and retries live in this process only; run a single replica")
        }
        let processor = JobProcessor(registry: registry, configuration: configuration.pipeline, store: store,
                                     retryQueue: retryQueue, metrics: PipelineMetrics(), logger: logger)
        pipeline = DeliveryPipeline(configuration: configuration.pipeline, consumerProperties: consumerProperties,
                                    producer: producer, processor: processor, logger: logger, observer: observer)
    }

    /// Runs until `pipeline.stop()`, then closes the producer and the plugins.
    public func run() async throws {
        try await pipeline.run()
        producer.close()
        await registry.shutdown()
    }

    static func makeRegistry(_ configuration: WorkerConfiguration, logger: Logger) throws -> ProviderRegistry {
        var registry = ProviderRegistry()
        let transportConfiguration = CurlTransportConfiguration(maximumConnectionsPerHost: configuration.maximumConnectionsPerHost)
        if configuration.enabledProviders.contains(.apns), let apns = configuration.apns {
            registry.register(try APNsProvider(configuration: apns,
                                               transport: CurlHTTPTransport(configuration: transportConfiguration, name: "apns"),
                                               logger: logger))
        }
        if configuration.enabledProviders.contains(.fcm), let fcm = configuration.fcm {
            registry.register(try FCMProvider(configuration: fcm,
                                              transport: CurlHTTPTransport(configuration: transportConfiguration, name: "fcm")))
        }
        if configuration.enabledProviders.contains(.webpush), let webPush = configuration.webPush {
            registry.register(try WebPushProvider(configuration: webPush,
                                                  transport: CurlHTTPTransport(configuration: transportConfiguration, name: "webpush")))
        }
        if configuration.enabledProviders.contains(.proxy), let proxy = configuration.proxy {
            registry.register(ProxyProvider(configuration: proxy,
                                            transport: CurlHTTPTransport(configuration: transportConfiguration, name: "proxy")))
        }
        return registry
    }

    static let producerOnly: Set<String> = ["enable.idempotence", "acks", "linger.ms", "compression.type",
                                             "message.timeout.ms", "batch.size", "queue.buffering.max.messages"]
    static let consumerOnly: Set<String> = ["auto.offset.reset", "enable.auto.commit", "auto.commit.interval.ms",
                                             "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
                                             "partition.assignment.strategy", "enable.partition.eof",
                                             "group.instance.id", "fetch.min.bytes", "fetch.wait.max.ms"]
}

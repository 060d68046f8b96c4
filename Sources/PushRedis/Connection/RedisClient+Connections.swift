import Logging
import NIOCore
import NIOPosix

extension RedisClient {
    /// The event loops of clients not given their own, one thread per core; each connection stays on one of them.
    public static let sharedEventLoops: any EventLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)

    /// - Parameters:
    ///   - connections: per node.
    ///   - tls: for `rediss://` (ignored for `redis://`): the files trusted and presented, the name verified.
    ///   - eventLoops: where the connections live (a connection stays on the loop it was given).
    public convenience init(
        url: RedisURL, connections: Int = 1, connectTimeout: Duration = .seconds(2),
        commandTimeout: Duration = .seconds(2), tls: RedisTLSSettings = RedisTLSSettings(),
        eventLoops: (any EventLoopGroup)? = nil, logger: Logger = Logger(label: "push.redis")
    ) {
        let contexts = url.usesTLS ? RedisTLSContexts(settings: tls, logger: logger) : nil
        let eventLoops = eventLoops ?? Self.sharedEventLoops
        self.init(url: url, commandTimeout: commandTimeout) { address in
            RedisNodePool(
                url: url, address: address, connections: connections, connectTimeout: connectTimeout,
                commandTimeout: commandTimeout, tls: contexts, serverName: contexts == nil ? nil : tls.nameToVerify(host: address.host),
                eventLoops: eventLoops)
        }
    }
}

import PushRedis
import PushSandbox

extension RedisServerProcess {
    public var url: RedisURL { RedisURL(urlString)! }

    public func client(connections: Int = 2) -> RedisClient {
        RedisClient(url: url, connections: connections, connectTimeout: .milliseconds(500), commandTimeout: .seconds(1))
    }
}

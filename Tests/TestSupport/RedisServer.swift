import PushRedis
import PushSandbox

extension RedisServerProcess {
    public var url: RedisURL { RedisURL(urlString)! }

    public func client(connections: Int = 2) -> RedisClient {
        RedisClient(url: url, connections: connections, connectTimeout: .milliseconds(500), commandTimeout: .seconds(1))
    }
}

/// Where a store test's Redis runs: every store test holds on one node and on a Redis Cluster.
public enum RedisDeployment: String, CaseIterable, Sendable, CustomStringConvertible {
    case single
    case cluster

    public var description: String { self == .single ? "one redis-server" : "a 3-master Redis Cluster" }

    public func start() async throws -> RunningRedis {
        switch self {
        case .single: RunningRedis(single: try await RedisServerProcess.launch())
        case .cluster: RunningRedis(cluster: try await RedisClusterProcesses.launch(masters: 3))
        }
    }
}

/// A started single node or cluster; `client` names its node or every node of the cluster.
public final class RunningRedis: Sendable {
    public let single: RedisServerProcess?
    public let cluster: RedisClusterProcesses?

    init(single: RedisServerProcess) {
        self.single = single
        cluster = nil
    }

    init(cluster: RedisClusterProcesses) {
        single = nil
        self.cluster = cluster
    }

    public var url: RedisURL { RedisURL(single?.urlString ?? cluster!.urlString)! }

    public func client(connections: Int = 2) -> RedisClient {
        RedisClient(url: url, connections: connections, connectTimeout: .milliseconds(500), commandTimeout: .seconds(1))
    }

    public func stop() {
        single?.stop()
        cluster?.stop()
    }
}

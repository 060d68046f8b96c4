import NIOCore
import PushCore
import Synchronization

/// A few connections to one Redis node (`RedisNodeConnection`), each on an event loop of the client's group; requests
/// go to them in turn. Commands batched in one `pipeline` call cost one round trip, and so do the pipelines of
/// concurrent callers that reach a connection while its loop is busy: they are written together.
final class RedisNodePool: Sendable {
    typealias Completion = RedisNodeConnection.Completion

    let address: RedisNodeAddress
    private let connections: [RedisNodeConnection]
    private let next = Atomic<Int>(0)

    init(
        url: RedisURL, address: RedisNodeAddress, connections: Int, connectTimeout: Duration, commandTimeout: Duration,
        tls: RedisTLSContexts?, serverName: String?, eventLoops: any EventLoopGroup
    ) {
        self.address = address
        let endpoint = RedisNodeConnection.Endpoint(
            address: address, url: url, connectTimeout: connectTimeout, commandTimeout: commandTimeout, tls: tls,
            serverName: serverName)
        self.connections = (0..<max(connections, 1)).map { _ in
            RedisNodeConnection(endpoint: endpoint, eventLoop: eventLoops.next())
        }
    }

    deinit { for connection in connections { connection.shutdown() } }

    /// Runs the commands in one round trip; error replies come back as `.error` values.
    func pipeline(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisValue] {
        try await result(of: commands).get()
    }

    /// `pipeline` with its failure as a value, for task groups.
    func result(of commands: [RedisCommand]) async -> Result<[RedisValue], RedisError> {
        guard !commands.isEmpty else { return .success([]) }
        return await withCheckedContinuation { submit(commands, .task($0)) }
    }

    /// Runs the commands, then `WAIT 1 <timeout>` on the same connection: the replies, then the number of replicas that
    /// acknowledged them. The durable requests that share a write share one `WAIT` after all of them (it counts
    /// every earlier write of the connection), so a replica that does not answer holds the connection once per write,
    /// not once per request.
    func replicated(_ commands: [RedisCommand], waitTimeout: Duration) async -> Result<[RedisValue], RedisError> {
        guard !commands.isEmpty else { return .success([]) }
        return await withCheckedContinuation { submit(commands, .task($0), replicaWait: max(1, waitTimeout.milliseconds)) }
    }

    /// Runs the commands in one round trip and calls `completion` with the replies, on the connection's event loop (in
    /// the order the pipelines were sent).
    func pipeline(_ commands: [RedisCommand], completion: @escaping Completion) {
        guard !commands.isEmpty else { return completion(.success([])) }
        submit(commands, .completion(completion))
    }

    private func submit(_ commands: [RedisCommand], _ waiter: RedisNodeConnection.Waiter, replicaWait: Int64? = nil) {
        let connection = connections[next.add(1, ordering: .relaxed).oldValue % connections.count]
        connection.submit(RedisNodeConnection.Request(commands: commands, waiter: waiter, replicaWait: replicaWait))
    }
}

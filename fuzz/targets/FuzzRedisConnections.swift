/// In place of Sources/PushRedis/Connection/ (swift-nio and NIOSSL): the fuzzers decode what Redis stores and never
/// connect, so a node's pool answers every request as unreachable.
final class RedisNodePool: Sendable {
    typealias Completion = @Sendable (Result<[RedisValue], RedisError>) -> Void
    let address: RedisNodeAddress

    init(address: RedisNodeAddress) { self.address = address }

    func pipeline(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisValue] { throw .unavailable("fuzzing") }
    func result(of commands: [RedisCommand]) async -> Result<[RedisValue], RedisError> { .failure(.unavailable("fuzzing")) }
    func replicated(_ commands: [RedisCommand], waitTimeout: Duration) async -> Result<[RedisValue], RedisError> {
        .failure(.unavailable("fuzzing"))
    }
    func pipeline(_ commands: [RedisCommand], completion: @escaping Completion) { completion(.failure(.unavailable("fuzzing"))) }
}

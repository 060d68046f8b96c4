import Dispatch
import Logging
import Synchronization

/// A small pool of hiredis connections, each driven by its own serial queue. Commands
/// batched in one `pipeline` call cost one round trip.
public final class RedisClient: Sendable {
    private struct Slot {
        let connection: RedisConnection
        let queue: DispatchQueue
    }

    public let url: RedisURL
    private let slots: [Slot]
    private let next = Atomic<Int>(0)
    private let scripts = Mutex<[String: String]>([:])

    public init(url: RedisURL, connections: Int = 4, connectTimeout: Duration = .seconds(2),
                commandTimeout: Duration = .seconds(2)) {
        self.url = url
        slots = (0..<max(connections, 1)).map { index in
            Slot(connection: RedisConnection(url: url, connectTimeout: connectTimeout, commandTimeout: commandTimeout),
                 queue: DispatchQueue(label: "redis-\(index)"))
        }
    }

    /// Runs the commands in one round trip; error replies come back as `.error` values.
    public func pipeline(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisValue] {
        guard !commands.isEmpty else { return [] }
        let slot = slots[next.add(1, ordering: .relaxed).oldValue % slots.count]
        let result: Result<[RedisValue], RedisError> = await withCheckedContinuation { continuation in
            slot.queue.async {
                continuation.resume(returning: Result { () throws(RedisError) -> [RedisValue] in
                    try slot.connection.pipeline(commands)
                })
            }
        }
        return try result.get()
    }

    /// One command; an error reply is thrown.
    public func command(_ command: RedisCommand) async throws(RedisError) -> RedisValue {
        let reply = try await pipeline([command])[0]
        if case .error(let message) = reply { throw .reply(message) }
        return reply
    }

    /// `EVALSHA` of a script loaded once per process, reloaded when the server lost it.
    public func evaluate(_ script: RedisScript, keys: [String], arguments: [[UInt8]]) async throws(RedisError) -> RedisValue {
        var sha = scripts.withLock { $0[script.source] }
        if sha == nil {
            sha = try await command(RedisCommand("SCRIPT", "LOAD", script.source)).string
            scripts.withLock { $0[script.source] = sha }
        }
        let call = [Array("EVALSHA".utf8), Array(sha!.utf8), Array(String(keys.count).utf8)] + keys.map { Array($0.utf8) } + arguments
        let reply = try await pipeline([RedisCommand(call)])[0]
        if case .error(let message) = reply {
            guard message.hasPrefix("NOSCRIPT") else { throw .reply(message) }
            scripts.withLock { $0[script.source] = nil }
            return try await evaluate(script, keys: keys, arguments: arguments)
        }
        return reply
    }

    /// Whether the server answers PING now.
    public func ping() async -> Bool {
        (try? await command(RedisCommand("PING")))?.string == "PONG"
    }
}

/// A Lua script run with `EVALSHA`.
public struct RedisScript: Sendable {
    public let source: String
    public init(_ source: String) { self.source = source }
}

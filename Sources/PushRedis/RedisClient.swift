import Dispatch
import Logging
import Synchronization

/// A small pool of hiredis connections, each driven by its own serial queue. Commands
/// batched in one `pipeline` call cost one round trip, and so do the pipelines of
/// concurrent callers that queue up while a connection is busy: they are written
/// together and their replies handed back to each caller.
public final class RedisClient: Sendable {
    private typealias Waiter = CheckedContinuation<Result<[RedisValue], RedisError>, Never>

    private struct Queued {
        var requests: [(commands: [RedisCommand], waiter: Waiter)] = []
        var draining = false
    }

    private final class Slot: Sendable {
        let connection: RedisConnection
        let queue: DispatchQueue
        let queued = Mutex(Queued())

        init(connection: RedisConnection, queue: DispatchQueue) {
            self.connection = connection
            self.queue = queue
        }
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
        let result: Result<[RedisValue], RedisError> = await withCheckedContinuation { waiter in
            let startDrain = slot.queued.withLock { queued in
                queued.requests.append((commands, waiter))
                defer { queued.draining = true }
                return !queued.draining
            }
            if startDrain { slot.queue.async { Self.drain(slot) } }
        }
        return try result.get()
    }

    /// Runs on the slot's queue: sends everything queued as one pipeline until nothing is left.
    private static func drain(_ slot: Slot) {
        while true {
            let requests = slot.queued.withLock { queued in
                defer { queued.requests.removeAll(keepingCapacity: true) }
                if queued.requests.isEmpty { queued.draining = false }
                return queued.requests
            }
            guard !requests.isEmpty else { return }
            let commands = requests.count == 1 ? requests[0].commands : requests.flatMap(\.commands)
            do {
                let replies = try slot.connection.pipeline(commands)
                var offset = 0
                for request in requests {
                    let count = request.commands.count
                    request.waiter.resume(returning: .success(Array(replies[offset..<(offset + count)])))
                    offset += count
                }
            } catch {
                for request in requests { request.waiter.resume(returning: .failure(error)) }
            }
        }
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

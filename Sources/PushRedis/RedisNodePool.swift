import Dispatch
import PushCore
import Synchronization

/// A small pool of hiredis connections to one Redis node, each driven by its own serial queue.
/// Commands batched in one `pipeline` call cost one round trip, and so do the pipelines of
/// concurrent callers that queue up while a connection is busy: they are written together and
/// their replies handed back to each caller.
final class RedisNodePool: Sendable {
    typealias Completion = @Sendable (Result<[RedisValue], RedisError>) -> Void

    /// Who gets a pipeline's replies: a task waiting for them, or a completion called on the slot's completion queue.
    private enum Waiter: Sendable {
        case task(CheckedContinuation<Result<[RedisValue], RedisError>, Never>)
        case completion(Completion)
    }

    private struct Request {
        var commands: [RedisCommand]
        var waiter: Waiter
        /// A write to be acknowledged by a replica: `WAIT 1 <ms>` follows the round trip it goes out in.
        var replicaWait: Int64?
    }

    private struct Queued {
        var requests: [Request] = []
        var draining = false
    }

    private final class Slot: Sendable {
        let connection: RedisConnection
        let queue: DispatchQueue
        /// Where the completions of a round trip run, in order, while the connection goes on with the next one:
        /// a burst of completions (each may log and publish) never holds back the commands queued behind it.
        let completions: DispatchQueue
        let queued = Locked(Queued())

        init(connection: RedisConnection, queue: DispatchQueue, completions: DispatchQueue) {
            self.connection = connection
            self.queue = queue
            self.completions = completions
        }
    }

    let address: RedisNodeAddress
    private let slots: [Slot]
    private let next = Atomic<Int>(0)

    init(url: RedisURL, address: RedisNodeAddress, connections: Int, connectTimeout: Duration, commandTimeout: Duration) {
        self.address = address
        var nodeURL = url
        nodeURL.host = address.host
        nodeURL.port = address.port
        slots = (0..<max(connections, 1)).map { index in
            Slot(
                connection: RedisConnection(url: nodeURL, connectTimeout: connectTimeout, commandTimeout: commandTimeout),
                queue: DispatchQueue(label: "redis-\(address)-\(index)"),
                completions: DispatchQueue(label: "redis-\(address)-\(index)-completions"))
        }
    }

    /// Runs the commands in one round trip; error replies come back as `.error` values.
    func pipeline(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisValue] {
        try await result(of: commands).get()
    }

    /// `pipeline` with its failure as a value, for task groups.
    func result(of commands: [RedisCommand]) async -> Result<[RedisValue], RedisError> {
        guard !commands.isEmpty else { return .success([]) }
        return await withCheckedContinuation { enqueue(commands, .task($0)) }
    }

    /// Runs the commands, then `WAIT 1 <timeout>` on the same connection: the replies, then the number of replicas that
    /// acknowledged them. The durable requests that share a round trip share one `WAIT` after all of them (it counts
    /// every earlier write of the connection), so a replica that does not answer holds the connection once per round
    /// trip, not once per request.
    func replicated(_ commands: [RedisCommand], waitTimeout: Duration) async -> Result<[RedisValue], RedisError> {
        guard !commands.isEmpty else { return .success([]) }
        return await withCheckedContinuation { enqueue(commands, .task($0), replicaWait: max(1, waitTimeout.milliseconds)) }
    }

    /// Runs the commands in one round trip and calls `completion` with the replies, on the connection's completion
    /// queue (in the order the pipelines were sent).
    func pipeline(_ commands: [RedisCommand], completion: @escaping Completion) {
        guard !commands.isEmpty else { return completion(.success([])) }
        enqueue(commands, .completion(completion))
    }

    private func enqueue(_ commands: [RedisCommand], _ waiter: Waiter, replicaWait: Int64? = nil) {
        let slot = slots[next.add(1, ordering: .relaxed).oldValue % slots.count]
        let startDrain = slot.queued.withLock { queued in
            queued.requests.append(Request(commands: commands, waiter: waiter, replicaWait: replicaWait))
            defer { queued.draining = true }
            return !queued.draining
        }
        if startDrain { slot.queue.async { Self.drain(slot) } }
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
            var commands = requests.count == 1 ? requests[0].commands : requests.flatMap(\.commands)
            let replicaWait = requests.compactMap(\.replicaWait).max()
            if let replicaWait { commands.append(RedisCommand("WAIT", "1", String(replicaWait))) }
            let results: [Result<[RedisValue], RedisError>]
            do {
                let replies = try slot.connection.pipeline(commands)
                var offset = 0
                results = requests.map { request in
                    defer { offset += request.commands.count }
                    let own = Array(replies[offset..<(offset + request.commands.count)])
                    return .success(request.replicaWait == nil ? own : own + [replies[replies.count - 1]])
                }
            } catch {
                results = requests.map { _ in .failure(error) }
            }
            var completions: [(Completion, Result<[RedisValue], RedisError>)] = []
            for (request, result) in zip(requests, results) {
                switch request.waiter {
                case .task(let continuation): continuation.resume(returning: result)
                case .completion(let completion): completions.append((completion, result))
                }
            }
            if !completions.isEmpty {
                let ready = completions
                slot.completions.async { for (completion, result) in ready { completion(result) } }
            }
        }
    }
}

import PushCore

/// Redis for the stores: one node, or a Redis Cluster, found out from the seed nodes of the URL
/// on first use (`CLUSTER SLOTS`; a node without cluster support is a single node).
///
/// On a cluster each command goes to the master of its key's slot; a pipeline is split per
/// master, the parts run at once, and the replies come back in the caller's order. A
/// `MULTI`…`EXEC` block travels as one piece (its keys share a slot through their hash tag).
/// Redirections mean the command did not run, so they are followed: `MOVED` updates the slot
/// map and resends, `ASK` resends once after `ASKING`, `TRYAGAIN` and `CLUSTERDOWN` resend after
/// a pause, at most `maximumRedirections` times. A node that cannot be reached makes the slot map
/// reload before the next command (a replica may have replaced its master); its commands fail
/// with `.unavailable`, as on one node, and are not resent (they may have run).
///
/// A write that must survive a failover (`evaluateReplicated`) goes straight to the node that serves its key and is
/// followed on its connection by `WAIT 1 <timeout>` where that node has replicas in sync: Redis replicates
/// asynchronously, so an acknowledged write a master had not passed on yet is gone once a replica takes its place
/// (https://redis.io/docs/latest/commands/wait/).
public final class RedisClient: Sendable {
    public let url: RedisURL
    private let commandTimeout: Duration
    private let scripts = Locked<[String: String]>([:])
    private let state = Locked(State())
    /// Per node (the masters of the topology, so a bounded set): how many replicas it had when last asked.
    private let replicaReadings = Locked<[RedisNodeAddress: ReplicaReading]>([:])

    private struct ReplicaReading {
        var replicas: Int
        var readAt: ContinuousClock.Instant
    }

    /// How long a node's replica count is trusted: a replica added or lost is noticed within this.
    static let replicaReadingLifetime: Duration = .seconds(5)

    static let maximumRedirections = 5
    static let redirectionPause: Duration = .milliseconds(100)

    private enum Topology {
        case unknown
        case single(RedisNodePool)
        case cluster(RedisSlotMap)
    }

    private struct State {
        var topology = Topology.unknown
        var pools: [RedisNodeAddress: RedisNodePool] = [:]
        /// The slot map must be read again before the next command (a node failed or redirected).
        var stale = false
        /// The slot map being read now: every caller that needs it waits for this one reading.
        var discovery: Task<Result<Topology, RedisError>, Never>?
    }

    /// Opens the connections to a node (`RedisClient+Connections.swift`).
    private let makePool: @Sendable (RedisNodeAddress) -> RedisNodePool

    init(
        url: RedisURL, commandTimeout: Duration, makePool: @escaping @Sendable (RedisNodeAddress) -> RedisNodePool
    ) {
        self.url = url
        self.commandTimeout = commandTimeout
        self.makePool = makePool
    }

    /// Whether the URL turned out to name a Redis Cluster (nil until the first command).
    public var isCluster: Bool? {
        state.withLock { state in
            switch state.topology {
            case .unknown: nil
            case .single: false
            case .cluster: true
            }
        }
    }

    /// The masters of the cluster as last read (empty on one node).
    public var clusterMasters: Set<RedisNodeAddress> {
        state.withLock { state in
            if case .cluster(let map) = state.topology { map.masters } else { [] }
        }
    }

    /// The master that serves `key` as the client's slot map has it (nil on one node or before the first command).
    func master(ofKey key: String) -> RedisNodeAddress? {
        state.withLock { state in
            if case .cluster(let map) = state.topology { map.owner(of: RedisKeySlot.of(key)) } else { nil }
        }
    }

    /// Runs the commands (one round trip per node); error replies come back as `.error` values. Commands of one slot
    /// go straight to its master while the slot map is current (see `pipeline(_:completion:)`).
    public func pipeline(_ commands: [RedisCommand]) async throws(RedisError) -> [RedisValue] {
        guard !commands.isEmpty else { return [] }
        if case .clusterNode(let pool) = route(commands), let answer = answer(await pool.result(of: commands)) {
            return try answer.get()
        }
        switch try await topology() {
        case .single(let pool):
            return try await pool.pipeline(commands)
        case .cluster(let map):
            return try await clusterPipeline(commands, map: map)
        case .unknown:
            throw .unavailable("no Redis node answered")
        }
    }

    /// `pipeline` with no task waiting: `completion` gets the replies on the connection's completion queue. On one
    /// node that is all. On a cluster whose slot map is current, commands of one slot (one command, or one
    /// `MULTI`…`EXEC` block) go straight to that slot's master too; a redirection in the answer sends them again
    /// through `pipeline` on a task of their own, as does anything else (several slots, no map yet).
    public func pipeline(_ commands: [RedisCommand], completion: @escaping @Sendable (Result<[RedisValue], RedisError>) -> Void) {
        switch route(commands) {
        case .single(let pool): return pool.pipeline(commands, completion: completion)
        case .clusterNode(let pool):
            return pool.pipeline(commands) { [self] result in
                if let answer = answer(result) { completion(answer) } else { onTask(commands, completion: completion) }
            }
        case .task: onTask(commands, completion: completion)
        }
    }

    /// Where a pipeline's commands go first (both forms of `pipeline`).
    private enum Route {
        case single(RedisNodePool)
        /// All of them to this cluster node, as the current slot map has it.
        case clusterNode(RedisNodePool)
        case task
    }

    /// The answer of the node `route` chose, or nil when it redirected the commands (which were then not run).
    private func answer(_ result: Result<[RedisValue], RedisError>) -> Result<[RedisValue], RedisError>? {
        switch result {
        case .failure:
            markStale()
            return result
        case .success(let replies):
            return replies.contains { RedisRedirection($0) != nil } ? nil : result
        }
    }

    private func route(_ commands: [RedisCommand]) -> Route {
        state.withLock { state in
            switch state.topology {
            case .single(let pool): return .single(pool)
            case .cluster(let map) where !state.stale:
                let pieces = Self.pieces(of: commands)
                // A node without a pool yet is rare (the map just changed): the task's pipeline opens it.
                guard pieces.count == 1, let slot = pieces[0].slot, let owner = map.owner(of: slot), let pool = state.pools[owner]
                else { return .task }
                return .clusterNode(pool)
            case .cluster, .unknown: return .task
            }
        }
    }

    private func onTask(_ commands: [RedisCommand], completion: @escaping @Sendable (Result<[RedisValue], RedisError>) -> Void) {
        Task {
            do throws(RedisError) {
                completion(.success(try await pipeline(commands)))
            } catch {
                completion(.failure(error))
            }
        }
    }

    /// One command; an error reply is thrown.
    public func command(_ command: RedisCommand) async throws(RedisError) -> RedisValue {
        let reply = try await pipeline([command])[0]
        if case .error(let message) = reply { throw .reply(message) }
        return reply
    }

    /// `EVALSHA` of a script loaded once per process; a node that does not know it (restarted, or
    /// another cluster node) gets the script itself with `EVAL`, which also loads it there.
    public func evaluate(_ script: RedisScript, keys: [String], arguments: [[UInt8]]) async throws(RedisError) -> RedisValue {
        let reply = try await evaluateAll(script, calls: [(keys, arguments)])[0]
        if case .error(let message) = reply { throw .reply(message) }
        return reply
    }

    /// Several calls of one script in one pipeline (on a cluster, one round trip per node); the
    /// replies in order, error replies as values.
    public func evaluateAll(_ script: RedisScript, calls: [(keys: [String], arguments: [[UInt8]])]) async throws(RedisError) -> [RedisValue]
    {
        guard !calls.isEmpty else { return [] }
        var sha = scripts.withLock { $0[script.source] }
        if sha == nil {
            sha = try await command(RedisCommand("SCRIPT", "LOAD", script.source)).string
            scripts.withLock { $0[script.source] = sha }
        }
        func tail(_ call: (keys: [String], arguments: [[UInt8]])) -> [[UInt8]] {
            [Array(String(call.keys.count).utf8)] + call.keys.map { Array($0.utf8) } + call.arguments
        }
        var replies = try await pipeline(calls.map { RedisCommand([Array("EVALSHA".utf8), Array(sha!.utf8)] + tail($0)) })
        let unknown = replies.indices.filter { index in
            if case .error(let message) = replies[index] { message.hasPrefix("NOSCRIPT") } else { false }
        }
        if !unknown.isEmpty {
            let again = try await pipeline(unknown.map { RedisCommand([Array("EVAL".utf8), Array(script.source.utf8)] + tail(calls[$0])) })
            for (index, reply) in zip(unknown, again) { replies[index] = reply }
        }
        return replies
    }

    /// `evaluate`, durable: where the node serving `keys[0]` has replicas, `WAIT 1 <timeout>` follows the call on
    /// its connection and the call returns once a replica acknowledged the write. No acknowledgement in time is not
    /// an error of the node (it answered, the write ran there): the reply comes back with its `shortfall`, and the
    /// caller keeps what depends on the write uncommitted. A node without replicas is not waited for. The wait is
    /// bounded below the connection's command timeout, which would otherwise drop the connection.
    ///
    /// `WAIT` covers the writes made on its own connection (https://redis.io/docs/latest/commands/wait/): a script
    /// that only reads is confirmed by a write of its own (see `RedisRetryQueue.confirmScript`).
    public func evaluateReplicated(
        _ script: RedisScript, keys: [String], arguments: [[UInt8]],
        timeout: Duration
    ) async throws(RedisError) -> ReplicatedReply {
        guard let key = keys.first, let node = try await node(serving: key) else { throw .unavailable("no Redis node serves the key") }
        let wait = await replicas(of: node) > 0 ? min(timeout, commandTimeout / 2) : nil
        var sha = scripts.withLock { $0[script.source] }
        if sha == nil {
            sha = try await command(RedisCommand("SCRIPT", "LOAD", script.source)).string
            scripts.withLock { $0[script.source] = sha }
        }
        let tail = [Array(String(keys.count).utf8)] + keys.map { Array($0.utf8) } + arguments
        var replies = try await send(RedisCommand([Array("EVALSHA".utf8), Array(sha!.utf8)] + tail), to: node, wait: wait)
        if case .error(let message) = replies[0], message.hasPrefix("NOSCRIPT") {
            replies = try await send(RedisCommand([Array("EVAL".utf8), Array(script.source.utf8)] + tail), to: node, wait: wait)
        }
        if case .error(let message) = replies[0] {
            // Sent straight to the node the slot map names: a redirection means the map is out of date and the write
            // did not run; the caller's retry finds the right node.
            if RedisRedirection(replies[0]) != nil { markStale() }
            throw .reply(message)
        }
        guard wait != nil else { return ReplicatedReply(value: replies[0], shortfall: nil) }
        let acknowledged = Int(clamping: replies.last?.integer ?? 0)
        return ReplicatedReply(
            value: replies[0],
            shortfall: acknowledged < 1 ? ReplicationShortfall(node: "\(node)", acknowledged: acknowledged, required: 1) : nil)
    }

    /// One command to `node`, followed by `WAIT` when `wait` is set.
    private func send(_ command: RedisCommand, to node: RedisNodeAddress, wait: Duration?) async throws(RedisError) -> [RedisValue] {
        let pool = pool(for: node)
        let result = if let wait { await pool.replicated([command], waitTimeout: wait) } else { await pool.result(of: [command]) }
        do {
            return try result.get()
        } catch {
            markStale()
            throw error
        }
    }

    /// The node that serves `key` now: the one node, or the master of its slot.
    private func node(serving key: String) async throws(RedisError) -> RedisNodeAddress? {
        switch try await topology() {
        case .single(let pool): pool.address
        case .cluster(let map): map.owner(of: RedisKeySlot.of(key)) ?? map.masters.first
        case .unknown: nil
        }
    }

    /// Replicas of `node` in sync with it (`INFO replication`, `state=online`: one still loading its first copy cannot
    /// acknowledge), read again once the last reading is older than `replicaReadingLifetime`. A node that refuses
    /// `INFO` counts as having none: its writes are not waited for.
    func replicas(of node: RedisNodeAddress) async -> Int {
        let now = ContinuousClock.now
        if let reading = replicaReadings.withLock({ $0[node] }), now - reading.readAt < Self.replicaReadingLifetime {
            return reading.replicas
        }
        let reply = try? await pool(for: node).pipeline([RedisCommand("INFO", "replication")]).first
        let replicas = reply?.string.map(Self.onlineReplicas(inReplicationInfo:)) ?? 0
        replicaReadings.withLock { $0[node] = ReplicaReading(replicas: replicas, readAt: now) }
        return replicas
    }

    /// Counts the `slave<n>:ip=…,port=…,state=online,…` lines of a master's `INFO replication` (none on a replica).
    static func onlineReplicas(inReplicationInfo text: String) -> Int {
        guard text.contains("role:master") else { return 0 }
        return text.split(whereSeparator: \.isNewline).filter { line in
            line.hasPrefix("slave") && line.split(separator: ",").contains("state=online")
        }.count
    }

    /// Whether Redis answers PING now (on a cluster, every master).
    public func ping() async -> Bool {
        guard let topology = try? await topology() else { return false }
        switch topology {
        case .single(let pool):
            return (try? await pool.pipeline([RedisCommand("PING")]))?.first?.string == "PONG"
        case .cluster(let map):
            for master in map.masters {
                guard (try? await pool(for: master).pipeline([RedisCommand("PING")]))?.first?.string == "PONG" else { return false }
            }
            return true
        case .unknown:
            return false
        }
    }

    // MARK: Topology

    private func topology() async throws(RedisError) -> Topology {
        let (known, stale) = state.withLock { ($0.topology, $0.stale) }
        switch known {
        case .single: return known
        case .cluster where !stale: return known
        case .cluster, .unknown: break
        }
        // One reading at a time: a failover marks the map stale under thousands of jobs at once, and each asking
        // CLUSTER SLOTS for itself would make the cluster build its map thousands of times.
        let discovery = state.withLock { state -> Task<Result<Topology, RedisError>, Never> in
            if let running = state.discovery { return running }
            // The task takes this lock before it ends, so it is stored here before it can clear it.
            let task = Task { [self] () -> Result<Topology, RedisError> in
                let result: Result<Topology, RedisError>
                do throws(RedisError) { result = .success(try await discover(previous: known)) } catch { result = .failure(error) }
                self.state.withLock { $0.discovery = nil }
                return result
            }
            state.discovery = task
            return task
        }
        return try await discovery.value.get()
    }

    /// Asks the seed nodes, then the masters last known, for the slot map; the first answer wins.
    private func discover(previous: Topology) async throws(RedisError) -> Topology {
        var candidates = url.seeds
        if case .cluster(let map) = previous { candidates = Array(map.masters) + candidates }
        var lastError = RedisError.unavailable("no Redis node named")
        var seen = Set<RedisNodeAddress>()
        for address in candidates where seen.insert(address).inserted {
            let pool = pool(for: address)
            let reply: RedisValue
            do {
                reply = try await pool.pipeline([RedisCommand("CLUSTER", "SLOTS")])[0]
            } catch {
                lastError = error
                continue
            }
            if case .error(let message) = reply {
                // Any other error (LOADING, a failover in progress) says nothing about the topology: ask again later.
                guard case .unknown = previous, Self.meansSingleNode(message) else {
                    lastError = .reply(message)
                    continue
                }
                let topology = Topology.single(pool)
                state.withLock { $0.topology = topology }
                return topology
            }
            guard let map = RedisSlotMap(clusterSlots: reply, announcedBy: address) else {
                lastError = .unavailable("\(address) answered CLUSTER SLOTS without a slot range")
                continue
            }
            let topology = Topology.cluster(map)
            state.withLock { state in
                state.topology = topology
                state.stale = false
            }
            return topology
        }
        throw lastError
    }

    /// Whether an error answer to `CLUSTER SLOTS` means the node is not part of a cluster: cluster support
    /// is disabled there, the command does not exist (a Redis-compatible server), or the user may not run it.
    static func meansSingleNode(_ message: String) -> Bool {
        message.contains("cluster support disabled") || message.hasPrefix("NOPERM") || message.hasPrefix("ERR unknown command")
    }

    private func pool(for address: RedisNodeAddress) -> RedisNodePool {
        state.withLock { state in
            if let pool = state.pools[address] { return pool }
            let pool = makePool(address)
            state.pools[address] = pool
            return pool
        }
    }

    func markStale() { state.withLock { $0.stale = true } }

    private func learn(_ slot: Int, movedTo address: RedisNodeAddress) {
        state.withLock { state in
            guard case .cluster(var map) = state.topology else { return }
            map.assign(slot, to: address)
            state.topology = .cluster(map)
            state.stale = true
        }
    }

    // MARK: Cluster pipelines

    /// A command, or a `MULTI`…`EXEC` block, with where its replies go in the caller's list.
    private struct Piece {
        var commands: [RedisCommand]
        var offset: Int
        var slot: Int?
        /// `ASKING` first, to the node an `ASK` named.
        var asking: RedisNodeAddress?
    }

    private static func pieces(of commands: [RedisCommand]) -> [Piece] {
        var pieces: [Piece] = []
        var index = 0
        while index < commands.count {
            var end = index + 1
            if commands[index].isNamed("MULTI") {
                while end < commands.count, !commands[end - 1].isNamed("EXEC") { end += 1 }
            }
            let block = Array(commands[index..<end])
            let slot = block.lazy.compactMap(\.firstKey).first.map { RedisKeySlot.of($0) }
            pieces.append(Piece(commands: block, offset: index, slot: slot))
            index = end
        }
        return pieces
    }

    private func clusterPipeline(_ commands: [RedisCommand], map: RedisSlotMap) async throws(RedisError) -> [RedisValue] {
        var replies = [RedisValue](repeating: .null, count: commands.count)
        var pending = Self.pieces(of: commands)
        var map = map
        for round in 0...Self.maximumRedirections {
            let anyMaster = map.masters.first
            var byNode: [RedisNodeAddress: [Piece]] = [:]
            for piece in pending {
                guard let node = piece.asking ?? piece.slot.flatMap(map.owner(of:)) ?? anyMaster else {
                    throw .unavailable("the Redis Cluster serves no slot")
                }
                byNode[node, default: []].append(piece)
            }
            let assignments = Array(byNode)
            var results = [Result<[RedisValue], RedisError>?](repeating: nil, count: assignments.count)
            func commands(of pieces: [Piece]) -> [RedisCommand] {
                pieces.flatMap { piece in piece.asking == nil ? piece.commands : [RedisCommand("ASKING")] + piece.commands }
            }
            if assignments.count == 1 {
                // One node (the usual case: the keys of one binding share a slot): no task group.
                results[0] = await pool(for: assignments[0].key).result(of: commands(of: assignments[0].value))
            } else {
                await withTaskGroup(of: (Int, Result<[RedisValue], RedisError>).self) { group in
                    for (index, (node, pieces)) in assignments.enumerated() {
                        let commands = commands(of: pieces)
                        let pool = pool(for: node)
                        group.addTask { (index, await pool.result(of: commands)) }
                    }
                    for await (index, result) in group { results[index] = result }
                }
            }
            var again: [Piece] = []
            var pause = false
            for (index, (_, pieces)) in assignments.enumerated() {
                let nodeReplies: [RedisValue]
                switch results[index]! {
                case .success(let values): nodeReplies = values
                case .failure(let error):
                    markStale()
                    throw error
                }
                var cursor = 0
                for var piece in pieces {
                    if piece.asking != nil { cursor += 1 }
                    let own = nodeReplies[cursor..<(cursor + piece.commands.count)]
                    cursor += piece.commands.count
                    let redirection = own.lazy.compactMap { RedisRedirection($0) }.first
                    guard let redirection, round < Self.maximumRedirections else {
                        for (index, reply) in own.enumerated() { replies[piece.offset + index] = reply }
                        continue
                    }
                    piece.asking = nil
                    switch redirection {
                    case .moved(let slot, let address):
                        learn(slot, movedTo: address)
                        map.assign(slot, to: address)
                    case .ask(_, let address):
                        // A transaction cannot follow ASK (ASKING covers one command): it waits for the move to end.
                        if piece.commands.count == 1 { piece.asking = address } else { pause = true }
                    case .tryAgain, .clusterDown:
                        pause = true
                        markStale()
                    }
                    again.append(piece)
                }
            }
            if again.isEmpty { return replies }
            if pause {
                try? await Task.sleep(for: Self.redirectionPause)
                if case .cluster(let fresh) = try await topology() { map = fresh }
            }
            pending = again
        }
        return replies
    }
}

/// A script's reply from `evaluateReplicated`, and how far its write was from durable.
public struct ReplicatedReply: Sendable {
    public var value: RedisValue
    /// Set when the node has replicas and none acknowledged the write in time: it ran on the node only.
    public var shortfall: ReplicationShortfall?
}

/// A Lua script run with `EVALSHA`.
public struct RedisScript: Sendable {
    public let source: String
    public init(_ source: String) { self.source = source }
}

extension RedisCommand {
    func isNamed(_ name: String) -> Bool {
        guard let first = argumentRanges(limit: 1).first, first.count == name.utf8.count else { return false }
        return zip(encoded[first], name.utf8).allSatisfy { ($0 | 0x20) == ($1 | 0x20) }
    }
}

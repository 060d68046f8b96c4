import NIOCore
import PushCore

/// The requests to one host, port, pinned address, TLS options, connection lifetime and connection identity
/// (`ConnectionIdentity`), and the HTTP/2 connections that carry them; lives on the transport's event loop.
///
/// A request waits here until a connection has a free stream, so its timeout runs from when it
/// is sent, not while it queues: a busy or slow host makes requests wait, and that is backpressure.
/// Only when no stream of the pool started or ended for a whole timeout of a waiting request
/// (the server announced SETTINGS_MAX_CONCURRENT_STREAMS 0 and never raised it) does that request
/// fail as timed out, unsent. Urgent requests start before waiting normal ones, and normal ones
/// leave `urgentReservedStreams` of the pool's streams free for urgent ones. A second connection
/// opens when requests wait or the open ones are half full, up to `maximumConnectionsPerHost`, but not while a
/// connection not yet answered is held below its stream limit by the server (APNs, until a provider token is accepted).
/// Once its last connection closed with nothing waiting or in flight it is unused, and tells `whenUnused`.
/// A retired pool (its identity is no longer configured) still sends what waits for it, then closes each connection
/// once its last stream ended.
final class HTTP2ConnectionPool {
    struct Key: Hashable {
        var host: String
        var port: Int
        var tls: TLSOptions
        var lifetime: HTTPConnectionLifetime
        /// The address its connections go to, when its requests are pinned to one: another address of the same host
        /// is another pool, so a connection is never shared by requests pinned to different addresses.
        var pinned: PinnedAddress?
        /// Requests of different identities never share a connection (APNs binds one to a signing key).
        var identity: ConnectionIdentity?
        /// The egress proxy its connections tunnel through (`HTTPTransportConfiguration.egressProxy`, when `NO_PROXY` does
        /// not exclude the host); nil: straight to the host.
        var proxy: EgressProxy?
    }

    /// How often a request the server refused unprocessed (REFUSED_STREAM, or beyond a GOAWAY's
    /// last stream) is sent again before it fails.
    static let maximumHandBacks = 3

    let key: Key
    private let configuration: HTTPTransportConfiguration
    private let framing: HTTP2FramingKind
    private let eventLoop: any EventLoop
    private let fallback: FallbackTransport
    private let contexts: TLSContextCache
    private let whenUnused: (HTTP2ConnectionPool) -> Void
    private var waiting = LaneQueue<HTTP2Transfer>()
    private var connections: [HTTP2ClientConnection] = []
    private var openStreams = 0
    private let streams: LaneCapacity
    /// The server chose HTTP/1.1 in the TLS handshake: its requests go to the fallback client.
    private var speaksOnlyHTTP1 = false
    private var handBacks: [UInt64: Int] = [:]
    /// Requests the fallback client carries now, to cancel with the task that sent them.
    private let fallbackSends = FallbackSends()
    /// After a connection failed, no further connection opens beside working ones before this (no storm of
    /// attempts, say, while a rotated client certificate is broken).
    private var extraConnectionsAllowedAt = NIODeadline.distantPast
    static let connectionFailurePause = TimeAmount.seconds(1)
    /// How often the waiting requests are checked for one that waited a whole timeout without progress.
    static let waitCheckInterval = TimeAmount.milliseconds(500)
    private var waitCheck: Scheduled<Void>?
    /// When a stream of this pool last started or ended.
    private var lastProgress = NIODeadline.now()
    /// The transport no longer gives this pool new requests (`retire()`).
    private var retired = false

    init(
        key: Key, configuration: HTTPTransportConfiguration, framing: HTTP2FramingKind, eventLoop: any EventLoop,
        fallback: FallbackTransport,
        contexts: TLSContextCache, whenUnused: @escaping (HTTP2ConnectionPool) -> Void
    ) {
        self.key = key
        self.contexts = contexts
        self.whenUnused = whenUnused
        self.configuration = configuration
        self.framing = framing
        self.eventLoop = eventLoop
        self.fallback = fallback
        streams = LaneCapacity(
            total: configuration.maximumConnectionsPerHost * configuration.maximumStreamsPerConnection,
            reservedForUrgent: configuration.urgentReservedStreams)
    }

    func submit(_ transfer: HTTP2Transfer) {
        if transfer.request.resolvedByProxy, key.proxy == nil {
            transfer.complete(.failure(.invalidRequest("the host was left for an egress proxy to resolve, and none applies to it")))
            return
        }
        if speaksOnlyHTTP1 {
            sendThroughFallback(transfer)
            return
        }
        waiting.append(transfer, lane: transfer.request.lane)
        dispatch()
        checkWaitingLater()
    }

    /// While requests wait, checks now and then for those that waited a whole timeout of their own while no stream moved.
    private func checkWaitingLater() {
        guard waitCheck == nil, !waiting.isEmpty else { return }
        waitCheck = eventLoop.assumeIsolated().scheduleTask(in: Self.waitCheckInterval) { [self] in
            waitCheck = nil
            let now = NIODeadline.now()
            let expired = waiting.removeAll { transfer in
                let timeout = TimeAmount(transfer.request.timeout)
                return now - transfer.submittedAt >= timeout && now - lastProgress >= timeout
            }
            for transfer in expired {
                handBacks[transfer.id] = nil
                transfer.complete(.failure(.timedOut))
            }
            checkWaitingLater()
        }
    }

    /// Starts what may start now and opens a connection if more room is needed.
    func dispatch() {
        while !waiting.isEmpty, let connection = leastLoadedConnectionWithRoom() {
            guard let transfer = waiting.popFirst(normalAllowed: streams.hasRoom(for: .normal, used: openStreams)) else { break }
            openStreams += 1
            lastProgress = NIODeadline.now()
            connection.start(transfer)
        }
        if needsAnotherConnection { openConnection() }
        if retired, waiting.isEmpty {
            for connection in connections { connection.closeOnceIdle() }
        }
    }

    /// Takes no new requests from the transport: what waits is still sent, then every connection closes once its last
    /// stream ended, and the pool reports itself unused.
    func retire() {
        retired = true
        dispatch()
        // Requests the HTTP/1.1 fallback carries finish in their own tasks, with no connection of this pool to close.
        if connections.isEmpty, waiting.isEmpty { whenUnused(self) }
    }

    private func leastLoadedConnectionWithRoom() -> HTTP2ClientConnection? {
        var best: HTTP2ClientConnection?
        for connection in connections where connection.acceptsStreams && connection.openStreams < connection.capacity {
            if best == nil || connection.openStreams < best!.openStreams { best = connection }
        }
        return best
    }

    private var needsAnotherConnection: Bool {
        var usable = 0, halfFull = 0
        for connection in connections where connection.isUsable {
            if connection.isConnecting { return false }
            // A server that holds a new connection to fewer streams until its first answer (APNs, until the first provider
            // token is accepted) raises the limit then: a second connection now would double the connections of every
            // signing key for nothing.
            if !connection.hasAnswered, connection.capacity < configuration.maximumStreamsPerConnection { return false }
            usable += 1
            if connection.openStreams * 2 >= connection.capacity { halfFull += 1 }
        }
        guard usable < configuration.maximumConnectionsPerHost else { return false }
        if usable > 0, NIODeadline.now() < extraConnectionsAllowedAt { return false }
        return !waiting.isEmpty || (usable > 0 && halfFull == usable)
    }

    private func openConnection() {
        let connection = HTTP2ClientConnection(
            pool: self, configuration: configuration, lifetime: key.lifetime,
            framing: framing, eventLoop: eventLoop)
        connections.append(connection)
        connection.connect(to: key, contexts: contexts)
    }

    // MARK: What a connection reports

    /// A stream ended: answered, failed, or (`handingBack`) refused by the server before it was processed.
    func streamEnded(handingBack transfer: HTTP2Transfer? = nil) {
        openStreams -= 1
        lastProgress = NIODeadline.now()
        if let transfer {
            let count = handBacks[transfer.id, default: 0] + 1
            if count > Self.maximumHandBacks {
                handBacks[transfer.id] = nil
                transfer.complete(.failure(.connectionFailed("the server refused the request \(count) times without processing it")))
            } else {
                handBacks[transfer.id] = count
                waiting.prepend(transfer, lane: transfer.request.lane)
                checkWaitingLater()
            }
        }
    }

    func requestFinished(_ id: UInt64) {
        if !handBacks.isEmpty { handBacks[id] = nil }
    }

    func connectionReady() { dispatch() }

    /// The handshake chose HTTP/1.1: this pool's requests, waiting and future, go to the fallback client.
    func connectionSpeaksOnlyHTTP1(_ connection: HTTP2ClientConnection) {
        remove(connection)
        speaksOnlyHTTP1 = true
        for transfer in waiting.removeAll() { sendThroughFallback(transfer) }
    }

    /// A connection that never became ready: when no other one can carry them, the waiting requests fail with its error.
    func connectionFailed(_ connection: HTTP2ClientConnection, _ error: HTTPTransportError) {
        remove(connection)
        extraConnectionsAllowedAt = NIODeadline.now() + Self.connectionFailurePause
        if !connections.contains(where: \.isUsable) {
            for transfer in waiting.removeAll() { transfer.complete(.failure(error)) }
        }
        dispatch()
        if isUnused { whenUnused(self) }
    }

    func connectionClosed(_ connection: HTTP2ClientConnection) {
        remove(connection)
        dispatch()
        if isUnused { whenUnused(self) }
    }

    /// No request waits, none is in flight here or in the fallback client.
    var isIdle: Bool { waiting.isEmpty && openStreams == 0 && fallbackSends.isEmpty }
    /// Idle, with no connection open: nothing is lost by forgetting this pool.
    var isUnused: Bool { isIdle && connections.isEmpty }
    /// When a stream of this pool last started or ended.
    var lastUsed: NIODeadline { lastProgress }

    private func remove(_ connection: HTTP2ClientConnection) {
        connections.removeAll { $0 === connection }
    }

    private func sendThroughFallback(_ transfer: HTTP2Transfer) {
        let fallback = self.fallback
        fallbackSends.start(transfer.id) {
            do throws(HTTPTransportError) {
                transfer.complete(.success(try await fallback.transport.send(transfer.request)))
            } catch {
                transfer.complete(.failure(error))
            }
        }
    }

    // MARK: From the transport

    /// True if the request was this pool's (waiting or in flight) and is now cancelled.
    func cancel(_ id: UInt64) -> Bool {
        if let transfer = waiting.remove(where: { $0.id == id }) {
            handBacks[id] = nil
            transfer.complete(.failure(.cancelled))
            return true
        }
        if fallbackSends.cancel(id) { return true }
        return connections.contains { $0.cancel(id) }
    }

    func shutdown() {
        waitCheck?.cancel()
        waitCheck = nil
        fallbackSends.cancelAll()
        for transfer in waiting.removeAll() { transfer.complete(.failure(.shutDown)) }
        for connection in connections { connection.shutdown() }
        connections.removeAll()
    }
}

/// The requests a pool handed to the fallback client, each running in a task of its own until it ends or is cancelled.
private final class FallbackSends: Sendable {
    private let running = Locked<[UInt64: Task<Void, Never>]>([:])

    func start(_ id: UInt64, _ send: @escaping @Sendable () async -> Void) {
        running.withLock { running in
            // The task takes this lock before it ends, so its entry is in place before it is removed.
            running[id] = Task { [self] in
                await send()
                _ = self.running.withLock { $0.removeValue(forKey: id) }
            }
        }
    }

    var isEmpty: Bool { running.withLock { $0.isEmpty } }

    /// True if the request was running here and is now cancelled.
    func cancel(_ id: UInt64) -> Bool {
        guard let task = running.withLock({ $0.removeValue(forKey: id) }) else { return false }
        task.cancel()
        return true
    }

    func cancelAll() {
        for task in running.withLock({ running in
            defer { running.removeAll() }
            return Array(running.values)
        }) { task.cancel() }
    }
}

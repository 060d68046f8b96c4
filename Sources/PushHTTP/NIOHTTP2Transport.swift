import Metrics
import NIOCore
import NIOPosix
import PushCore

/// HTTP/2 over TLS on swift-nio: one event-loop thread owns every connection, and the writes of a
/// burst of requests leave in one flush. nghttp2 frames HTTP/2 (`HTTP2FramingKind`; tests put swift-nio-http2's
/// framing under the same connections, queues and timeouts as an oracle).
///
/// A request pinned to an address (Web Push, where the address was checked before the request) connects there, with TLS
/// for the URL's host (`PinnedAddress`). Every request to a host whose TLS handshake did not choose `h2` (an
/// HTTP/1.1-only endpoint) goes to `fallback` (libcurl over HTTP/1.1, `CurlHTTPTransport`, unless given), pinned there as here.
public final class NIOHTTP2Transport: HTTPTransport {
    private let group: MultiThreadedEventLoopGroup
    private let pools: NIOLoopBound<HTTP2ConnectionPools>
    private let eventLoop: any EventLoop
    private let fallback: FallbackTransport
    private let contexts: TLSContextCache
    private let state = Locked(State())

    private struct State {
        var nextID: UInt64 = 0
        var stopped = false
        /// Requests sent and not yet taken by the event loop. The first one queued schedules the loop to take
        /// them all: a burst of requests costs the loop one task and one wake-up, not one per request.
        var submitted: [HTTP2Transfer] = []
    }

    public init(
        configuration: HTTPTransportConfiguration = HTTPTransportConfiguration(), name: String = "http",
        framing: HTTP2FramingKind = .nghttp2, fallback: (any HTTPTransport)? = nil
    ) {
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let eventLoop = group.next()
        self.eventLoop = eventLoop
        let fallback = FallbackTransport(fallback, configuration: configuration, name: name)
        self.fallback = fallback
        let contexts = TLSContextCache(name: name)
        self.contexts = contexts
        // The loop was just made and runs nothing else yet: waiting for it here cannot deadlock.
        pools = try! eventLoop.submit {
            NIOLoopBound(
                HTTP2ConnectionPools(
                    configuration: configuration, framing: framing, eventLoop: eventLoop, fallback: fallback,
                    contexts: contexts, name: name),
                eventLoop: eventLoop)
        }.wait()
    }

    public func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
        // Checked and made out of line: a request in flight keeps this function's async frame, which then holds the
        // transfer alone.
        let transfer = try transfer(of: request)
        let pools = self.pools
        let id = transfer.id
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                transfer.waiter = .task(continuation)
                submit(transfer)
            }
        } onCancel: {
            // After the task that takes the request in: a cancel always finds its request submitted (or done).
            eventLoop.execute { pools.value.cancel(id) }
        }
        return try result.get()
    }

    public func start(_ request: HTTPRequest, completion: @escaping HTTPCompletion) -> any DeliveryInFlight {
        let transfer: HTTP2Transfer
        do {
            transfer = try self.transfer(of: request)
        } catch {
            completion(.failure(error))
            return NothingInFlight()
        }
        transfer.waiter = .callback(completion)
        submit(transfer)
        return InFlight(id: transfer.id, pools: pools, eventLoop: eventLoop)
    }

    /// A request `start` submitted: a cancel reaches its pool on the loop, after the submission (the loop's order).
    private struct InFlight: DeliveryInFlight {
        let id: UInt64
        let pools: NIOLoopBound<HTTP2ConnectionPools>
        let eventLoop: any EventLoop

        func cancel() { eventLoop.execute { [pools, id] in pools.value.cancel(id) } }
    }

    @inline(never)
    private func transfer(of request: HTTPRequest) throws(HTTPTransportError) -> HTTP2Transfer {
        if let problem = request.unsafeFieldDescription { throw .invalidRequest(problem) }
        guard let target = HTTPSTarget(request.url) else { throw .invalidRequest("only https URLs with a host are sent: \(request.url)") }
        var pinned: PinnedAddress?
        if let resolution = request.pinnedResolution {
            pinned = PinnedAddress(resolution, for: target)
            guard pinned != nil else { throw .invalidRequest("the pinned resolution must name the URL's host and port and an IP address") }
        }
        guard
            let id = state.withLock({ state -> UInt64? in
                guard !state.stopped else { return nil }
                state.nextID += 1
                return state.nextID
            })
        else { throw .shutDown }
        return HTTP2Transfer(id: id, request: request, target: target, pinned: pinned, submittedAt: .now())
    }

    private func submit(_ transfer: HTTP2Transfer) {
        let first = state.withLock { state in
            state.submitted.append(transfer)
            return state.submitted.count == 1
        }
        guard first else { return }
        eventLoop.execute { [self] in
            let transfers = state.withLock { state in
                defer { state.submitted = [] }
                return state.submitted
            }
            for transfer in transfers { pools.value.submit(transfer) }
        }
    }

    /// Every pool of an identity not in `live` takes no new requests; what waits for it is still sent, then its
    /// connections close as their last streams end, and it is forgotten. A later request of such an identity opens an
    /// pool of its own.
    public func closeConnections(except live: Set<ConnectionIdentity>) {
        guard !state.withLock({ $0.stopped }) else { return }
        let pools = self.pools
        eventLoop.execute { pools.value.retire(except: live) }
    }

    /// Fails what is queued or in flight with `.shutDown`, closes the connections and stops the thread.
    public func shutdown() {
        let first = state.withLock { state -> Bool in
            defer { state.stopped = true }
            return !state.stopped
        }
        guard first else { return }
        let pools = self.pools
        fallback.shutdown()
        if eventLoop.inEventLoop {
            // Released on its own loop (cannot wait for the loop there): close everything, let the threads end later.
            pools.value.shutdown()
            group.shutdownGracefully { _ in }
            contexts.shutdownLater()
            return
        }
        try? eventLoop.submit { pools.value.shutdown() }.wait()
        // Before the loop: a context still being built completes its future on the loop.
        contexts.shutdown()
        try? group.syncShutdownGracefully()
    }

    deinit { shutdown() }

    /// TLS contexts built so far (one per TLS options and credential content, `TLSContextCache`).
    var tlsContextBuilds: Int { contexts.buildCount }

    /// How many pools the transport keeps now.
    var poolCount: Int {
        get async { (try? await eventLoop.submit { [pools] in pools.value.count }.get()) ?? 0 }
    }
}

/// One request on its way: what the pool queues and a connection's stream carries. A class: it moves through
/// several queues, and a copy of the request's fields would retain each of them.
final class HTTP2Transfer: Sendable {
    let id: UInt64
    let request: HTTPRequest
    let target: HTTPSTarget
    /// Where to connect instead of resolving `target.host` (`HTTPRequest.pinnedResolution`).
    let pinned: PinnedAddress?
    let submittedAt: NIODeadline
    /// Who waits for the answer: a task (`send`) or a completion (`start`).
    enum Waiter {
        case task(CheckedContinuation<Result<HTTPResponse, HTTPTransportError>, Never>)
        case callback(HTTPCompletion)
    }

    /// Set once, by the sender before it submits the transfer (whose queues then order every later read).
    nonisolated(unsafe) var waiter: Waiter?

    init(id: UInt64, request: HTTPRequest, target: HTTPSTarget, pinned: PinnedAddress? = nil, submittedAt: NIODeadline) {
        self.id = id
        self.request = request
        self.target = target
        self.pinned = pinned
        self.submittedAt = submittedAt
    }

    func complete(_ result: Result<HTTPResponse, HTTPTransportError>) {
        switch waiter {
        case .task(let continuation): continuation.resume(returning: result)
        case .callback(let completion): completion(result)
        case nil: break
        }
    }
}

/// The HTTP/1.1 client (libcurl, `CurlHTTPTransport`) for hosts whose TLS handshake did not choose h2, made on first use.
final class FallbackTransport: Sendable {
    private let made: Locked<(any HTTPTransport)?>
    private let make: @Sendable () -> any HTTPTransport

    init(_ given: (any HTTPTransport)?, configuration: HTTPTransportConfiguration, name: String) {
        made = Locked(given)
        make = { CurlHTTPTransport(configuration: configuration, name: name) }
    }

    var transport: any HTTPTransport {
        made.withLock { made in
            if let made { return made }
            let transport = make()
            made = transport
            return transport
        }
    }

    func shutdown() { made.withLock { $0 }?.shutdown() }
}

/// Every connection pool (one per host, port, pinned address, TLS options…: `HTTP2ConnectionPool.Key`) the transport keeps;
/// lives on the event loop. A pool is forgotten once unused (its last connection closed, by its idle timer among others, with
/// nothing waiting or in flight), and the map is held to `maximumConnectionPools` (see there);
/// `push_http2_connection_pools` reports its size.
final class HTTP2ConnectionPools {
    private let configuration: HTTPTransportConfiguration
    private let framing: HTTP2FramingKind
    private let eventLoop: any EventLoop
    private let fallback: FallbackTransport
    private let contexts: TLSContextCache
    private var pools: [HTTP2ConnectionPool.Key: HTTP2ConnectionPool] = [:]
    /// Pools of identities no longer configured, finishing what they carry (`HTTP2ConnectionPool.retire()`) until unused.
    private var retiring: [ObjectIdentifier: HTTP2ConnectionPool] = [:]
    private var stopped = false
    /// Labelled by the transport's name, which the worker's plugins choose ("apns", "webpush"…), never by a host.
    private let poolGauge: Gauge

    init(
        configuration: HTTPTransportConfiguration, framing: HTTP2FramingKind, eventLoop: any EventLoop, fallback: FallbackTransport,
        contexts: TLSContextCache, name: String
    ) {
        self.contexts = contexts
        self.configuration = configuration
        self.framing = framing
        self.eventLoop = eventLoop
        self.fallback = fallback
        poolGauge = Gauge(label: "push_http2_connection_pools", dimensions: [("client", name)])
        poolGauge.record(0)
    }

    var count: Int { pools.count + retiring.count }

    func submit(_ transfer: HTTP2Transfer) {
        guard !stopped else {
            transfer.complete(.failure(.shutDown))
            return
        }
        var key = HTTP2ConnectionPool.Key(
            host: transfer.target.host, port: transfer.target.port, tls: transfer.request.tls,
            lifetime: transfer.request.connectionLifetime ?? configuration.connectionLifetime,
            identity: transfer.request.connectionIdentity)
        key.pinned = transfer.pinned
        key.proxy = configuration.egressProxy.flatMap { $0.applies(to: transfer.target.host) ? $0 : nil }
        let pool: HTTP2ConnectionPool
        if let existing = pools[key] {
            pool = existing
        } else {
            makeRoom()
            pool = HTTP2ConnectionPool(
                key: key, configuration: configuration, framing: framing, eventLoop: eventLoop, fallback: fallback,
                contexts: contexts
            ) {
                [weak self] pool in self?.forget(pool)
            }
            pools[key] = pool
            poolGauge.record(count)
        }
        pool.submit(transfer)
    }

    /// Retires every pool whose identity is set and not in `live` (`NIOHTTP2Transport.closeConnections(except:)`).
    func retire(except live: Set<ConnectionIdentity>) {
        guard !stopped else { return }
        for (key, pool) in pools {
            guard let identity = key.identity, !live.contains(identity) else { continue }
            pools[key] = nil
            retiring[ObjectIdentifier(pool)] = pool
            pool.retire()
        }
        poolGauge.record(count)
    }

    /// At the bound, forgets the unused pools (a pool the HTTP/1.1 fallback carries has no connection to close and
    /// is forgotten only here), then closes the least recently used idle one.
    private func makeRoom() {
        guard pools.count >= max(1, configuration.maximumConnectionPools) else { return }
        pools = pools.filter { !$0.value.isUnused }
        if pools.count >= configuration.maximumConnectionPools,
            let oldest = pools.values.lazy.filter(\.isIdle).min(by: { $0.lastUsed < $1.lastUsed })
        {
            pools[oldest.key] = nil
            oldest.shutdown()
        }
        poolGauge.record(count)
    }

    private func forget(_ pool: HTTP2ConnectionPool) {
        guard !stopped else { return }
        if retiring.removeValue(forKey: ObjectIdentifier(pool)) == nil {
            guard pools[pool.key] === pool else { return }
            pools[pool.key] = nil
        }
        poolGauge.record(count)
    }

    func cancel(_ id: UInt64) {
        for pool in pools.values where pool.cancel(id) { return }
        for pool in retiring.values where pool.cancel(id) { return }
    }

    func shutdown() {
        stopped = true
        for pool in pools.values { pool.shutdown() }
        for pool in retiring.values { pool.shutdown() }
        pools.removeAll()
        retiring.removeAll()
        poolGauge.record(0)
    }
}

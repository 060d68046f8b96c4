import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import PushCore

/// One HTTP/2 connection over TLS, on the transport's event loop: it opens the connection, puts the
/// framing (`HTTP2FramingKind`) under itself once the handshake chose h2, starts each request on a
/// stream of its own and puts the answer together from what the framing reports.
final class HTTP2ClientConnection: ChannelInboundHandler, RemovableChannelHandler, HTTP2FramingDelegate {
    typealias InboundIn = ByteBuffer

    private enum Phase {
        case connecting
        case ready
        /// GOAWAY received (or stream ids used up): no new streams; closes once the open ones end.
        case draining
        case closed
    }

    /// One request's stream and its answer so far.
    private final class Stream {
        enum HeaderBlock {
            /// The next field block should carry the answer's status.
            case awaitingStatus
            /// A 1xx block (100 Continue, 103 Early Hints): the answer follows in another.
            case informational
            case answer
            /// Trailers, or anything after the answer's fields: not kept.
            case after
        }

        let transfer: HTTP2Transfer
        let responseLimit: Int
        var status: Int?
        var block = HeaderBlock.awaitingStatus
        var headers: [(name: String, value: String)] = []
        var headerBytes = 0
        var body: [UInt8] = []
        var truncated = false
        let sentAt: NIODeadline
        /// When the request fails as timed out, unless answered before.
        let deadline: NIODeadline

        init(transfer: HTTP2Transfer, responseLimit: Int, sentAt: NIODeadline, deadline: NIODeadline) {
            self.transfer = transfer
            self.responseLimit = responseLimit
            self.sentAt = sentAt
            self.deadline = deadline
        }

        var response: HTTPResponse { HTTPResponse(status: status ?? 0, headers: headers, body: body, bodyTruncated: truncated) }
    }

    /// Fields HTTP/2 forbids or carries otherwise (RFC 9113 §8.2.2; `host` becomes `:authority`).
    private static func isConnectionSpecific(_ name: String) -> Bool {
        switch name {
        case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host", "te": true
        default: false
        }
    }

    /// HTTP/2 field names are lower case (RFC 9113 §8.2.1): the plugins' names and the server's
    /// (which the framing checks) already are, so most need no copy.
    private static func lowercased(_ name: String) -> String {
        name.containsUTF8Byte { $0 >= 0x41 && $0 <= 0x5A } ? name.lowercased() : name
    }

    private weak var pool: HTTP2ConnectionPool?
    private let configuration: HTTPTransportConfiguration
    private let eventLoop: any EventLoop
    private var phase = Phase.connecting
    private var context: ChannelHandlerContext?
    private var channel: (any Channel)?
    private let framingKind: HTTP2FramingKind
    private var framing: (any HTTP2Framing)?
    private var streams: [Int32: Stream] = [:]
    private var flushScheduled = false
    private var lastError: (any Error)?
    private var handshakeTimeout: Scheduled<Void>?
    /// Connected to the egress proxy, waiting for its answer to CONNECT (`HTTPConnectTunnel`).
    private var tunnelPending = false
    /// The one timer of the streams' timeouts, set for the earliest deadline it knows of.
    private var timeoutCheck: (deadline: NIODeadline, timer: Scheduled<Void>)?
    private var idleSince = NIODeadline.now()
    /// This connection's idle limit (`HTTPConnectionLifetime.maximumIdleTime`).
    private let maximumIdleTime: TimeAmount
    private var idleCheck: Scheduled<Void>?
    /// A PING after this long without a byte from the server (`HTTPConnectionLifetime.keepaliveInterval`).
    private let keepaliveInterval: TimeAmount?
    private var keepaliveCheck: Scheduled<Void>?
    private var lastRead = NIODeadline.now()
    /// When the keepalive timer last sent a PING (or found one awaiting its answer).
    private var lastKeepalive = NIODeadline.distantPast
    /// When the PING awaiting its answer was sent; nil when none is.
    private var pingInFlight: NIODeadline?
    private let pingTimeout: TimeAmount
    private(set) var capacity: Int
    /// A stream of this connection was answered. Until then a server may hold the connection to a few streams on purpose:
    /// APNs allows one until the connection's first provider token is accepted, then raises the limit.
    private(set) var hasAnswered = false

    init(
        pool: HTTP2ConnectionPool, configuration: HTTPTransportConfiguration, lifetime: HTTPConnectionLifetime, framing: HTTP2FramingKind,
        eventLoop: any EventLoop
    ) {
        self.pool = pool
        maximumIdleTime = TimeAmount(lifetime.maximumIdleTime)
        keepaliveInterval = lifetime.keepaliveInterval.map(TimeAmount.init)
        pingTimeout = TimeAmount(lifetime.pingTimeout)
        framingKind = framing
        self.configuration = configuration
        self.eventLoop = eventLoop
        capacity = configuration.maximumStreamsPerConnection
    }

    var openStreams: Int { streams.count }

    /// Ready for a new stream; a connection idle beyond `maximumIdleTime` whose timer has not fired yet is closed here
    /// instead of reused.
    var acceptsStreams: Bool {
        guard phase == .ready else { return false }
        if streams.isEmpty, NIODeadline.now() - idleSince > maximumIdleTime {
            closeIdle()
            return false
        }
        return true
    }

    /// Closes the connection once it had no stream for `maximumIdleTime`, by its own timer: a connection of a pool
    /// used once would otherwise stay open until that pool's next request. One timer at a time, armed when the
    /// last stream ends and not cancelled when the next starts (a cancel searches the loop's queue of scheduled tasks):
    /// when it fires it looks again, and waits on if the connection was used meanwhile.
    private func armIdleCheck() {
        guard idleCheck == nil, phase == .ready, streams.isEmpty else { return }
        idleCheck = eventLoop.assumeIsolated().scheduleTask(deadline: idleSince + maximumIdleTime) { [self] in
            idleCheck = nil
            guard phase == .ready, streams.isEmpty else { return }
            if NIODeadline.now() - idleSince >= maximumIdleTime { closeIdle() } else { armIdleCheck() }
        }
    }

    private func closeIdle() {
        phase = .draining
        context?.close(promise: nil)
    }

    /// Takes no new stream and closes once the open ones have ended (at once when none is open). A connection still
    /// connecting is closed by the pool's next look, once it is ready.
    func closeOnceIdle() {
        guard phase == .ready else { return }
        phase = .draining
        if streams.isEmpty { context?.close(promise: nil) }
    }

    /// Sends a PING (`checkAlive`) once the server was silent for `keepaliveInterval`, for as long as the connection is
    /// ready: one timer at a time, set for when the silence would reach the interval; a connection that hears from its
    /// server (answers, the PING's acknowledgement) pushes it back and sends none.
    private func armKeepalive() {
        guard let interval = keepaliveInterval, keepaliveCheck == nil, phase == .ready else { return }
        keepaliveCheck = eventLoop.assumeIsolated().scheduleTask(deadline: max(lastRead, lastKeepalive) + interval) { [self] in
            keepaliveCheck = nil
            guard phase == .ready else { return }
            let now = NIODeadline.now()
            if now - max(lastRead, lastKeepalive) >= interval {
                checkAlive()
                // Sent now, or one already awaits its answer: either way the next look is an interval away.
                lastKeepalive = now
            }
            armKeepalive()
        }
    }

    private func cancelTimers() {
        handshakeTimeout?.cancel()
        cancelTimeoutCheck()
        idleCheck?.cancel()
        idleCheck = nil
        keepaliveCheck?.cancel()
        keepaliveCheck = nil
    }
    var isConnecting: Bool { phase == .connecting }
    var isUsable: Bool { phase == .connecting || phase == .ready }

    // MARK: Connecting

    /// Connects once the TLS context is ready (`TLSContextCache`, built off the event loop); `connectTimeout` bounds
    /// the whole: the context, the TCP connection and the TLS handshake.
    func connect(to key: HTTP2ConnectionPool.Key, contexts: TLSContextCache) {
        let timeout = min(configuration.connectTimeout, .seconds(3600))
        handshakeTimeout = eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(timeout)) { [self] in
            guard phase == .connecting else { return }
            if let proxy = key.proxy, tunnelPending {
                tunnelPending = false
                lastError = EgressProxyFailure.timedOut.record(proxy: proxy, target: Self.displayedTarget(key))
            } else {
                lastError = ChannelError.connectTimeout(TimeAmount(timeout))
            }
            if let channel {
                channel.close(promise: nil)
            } else {
                // No channel yet: the context or the TCP connection is late; whichever comes finds the connection closed.
                phase = .closed
                pool?.connectionFailed(self, Self.transportError(lastError))
            }
        }
        contexts.context(for: key.tls, on: eventLoop).assumeIsolated().whenComplete { [self] result in
            guard phase == .connecting else { return }
            switch result {
            case .success(let sslContext):
                connect(to: key, sslContext: sslContext)
            case .failure(let error):
                phase = .closed
                handshakeTimeout?.cancel()
                pool?.connectionFailed(self, error as? HTTPTransportError ?? .tls("\(error)"))
            }
        }
    }

    private func connect(to key: HTTP2ConnectionPool.Key, sslContext: NIOSSLContext) {
        // The host's name, pinned or not: SNI and the certificate check are for the name (`PinnedAddress`).
        let serverHostname = TLSOptions.isIPAddress(key.host) ? nil : key.host
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let timeout = min(configuration.connectTimeout, .seconds(3600))
        let tunnel = key.proxy.map { proxy in
            HTTPConnectTunnel(
                proxy: proxy, target: Self.tunnelTarget(key),
                established: { context in
                    // TLS for the target, inside the tunnel; it starts its handshake as it is added (the channel is active).
                    do {
                        let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname)
                        try context.pipeline.syncOperations.addHandler(tls, position: .before(bound.value))
                    } catch {
                        bound.value.lastError = error
                        context.close(promise: nil)
                    }
                    bound.value.tunnelPending = false
                },
                failed: { failure in bound.value.tunnelFailed(failure, key: key) })
        }
        tunnelPending = tunnel != nil
        let tunnelBound = tunnel.map { NIOLoopBound($0, eventLoop: eventLoop) }
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(timeout))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tunnelBound {
                        try channel.pipeline.syncOperations.addHandlers([tunnelBound.value, bound.value])
                    } else {
                        let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname)
                        try channel.pipeline.syncOperations.addHandlers([tls, bound.value])
                    }
                }
            }
        let connecting =
            if let proxy = key.proxy {
                bootstrap.connect(host: proxy.host, port: proxy.port)
            } else if let pinned = key.pinned {
                bootstrap.connect(to: pinned.socketAddress)
            } else {
                bootstrap.connect(host: key.host, port: key.port)
            }
        connecting
            .assumeIsolated()
            .whenComplete { [self] result in
                switch result {
                case .success(let channel):
                    if phase == .closed { channel.close(promise: nil) } else { self.channel = channel }
                case .failure(let error):
                    guard phase == .connecting else { return }
                    phase = .closed
                    handshakeTimeout?.cancel()
                    var failure = Self.transportError(lastError ?? error)
                    if let proxy = key.proxy, lastError == nil {
                        let why: EgressProxyFailure =
                            if case .timedOut = failure { .timedOut } else { .unreachable(detail: "\(error)") }
                        failure = why.record(proxy: proxy, target: Self.displayedTarget(key))
                    }
                    pool?.connectionFailed(self, failure)
                }
            }
    }

    /// The CONNECT target: the checked address of a pinned request (so the proxy cannot be steered to another one, as
    /// DNS could not), else the host's name, which the proxy resolves.
    static func tunnelTarget(_ key: HTTP2ConnectionPool.Key) -> String {
        EgressProxy.authority(key.pinned?.address ?? key.host, key.port)
    }

    /// What errors name: the request's host, never the address it was pinned to.
    static func displayedTarget(_ key: HTTP2ConnectionPool.Key) -> String { EgressProxy.authority(key.host, key.port) }

    private func tunnelFailed(_ failure: EgressProxyFailure, key: HTTP2ConnectionPool.Key) {
        guard tunnelPending, let proxy = key.proxy, phase == .connecting else { return }
        tunnelPending = false
        lastError = failure.record(proxy: proxy, target: Self.displayedTarget(key))
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    /// The context holds this handler: a connection whose channel closed without ever becoming active (the TCP
    /// connection refused, or it timed out) gets no `channelInactive`, so the cycle is broken here.
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent {
            handshakeCompleted(context: context, negotiated: negotiated)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func handshakeCompleted(context: ChannelHandlerContext, negotiated: String?) {
        handshakeTimeout?.cancel()
        guard phase == .connecting else { return }
        guard negotiated == "h2" else {
            phase = .closed
            pool?.connectionSpeaksOnlyHTTP1(self)
            context.close(promise: nil)
            return
        }
        do {
            // Added only now, inside the handshake event, so the server's preface reaches it (NOTES: else ReceivedBadSettings).
            framing = try framingKind.install(in: context.pipeline.syncOperations, below: self)
        } catch {
            lastError = error
            context.close(promise: nil)
            return
        }
        phase = .ready
        idleSince = NIODeadline.now()
        armIdleCheck()
        armKeepalive()
        pool?.connectionReady()
    }

    // MARK: Requests

    func start(_ transfer: HTTP2Transfer) {
        guard let framing, phase == .ready else {
            pool?.streamEnded(handingBack: transfer)
            return
        }
        let request = transfer.request
        var fields: [(name: String, value: String)] = []
        fields.reserveCapacity(request.headers.count + 1)
        var hasContentLength = false
        for header in request.headers {
            let name = Self.lowercased(header.name)
            guard !Self.isConnectionSpecific(name) else { continue }
            if name == "content-length" { hasContentLength = true }
            fields.append((name, header.value))
        }
        let hasBody = request.method != "GET" && request.method != "HEAD"
        if hasBody && !hasContentLength { fields.append(("content-length", String(request.body.count))) }
        let head = HTTP2RequestHead(
            method: request.method, authority: transfer.target.authority, path: transfer.target.path, fields: fields)
        let id: Int32
        switch framing.startStream(head, body: hasBody ? request.body : nil) {
        case .started(let started):
            id = started
        case .noStreamLeft:
            phase = .draining
            pool?.streamEnded(handingBack: transfer)
            return
        case .failed(let error):
            pool?.requestFinished(transfer.id)
            transfer.complete(.failure(error))
            pool?.streamEnded()
            return
        }
        // Stream ids are odd and end at 2^31 - 1 (RFC 9113 §5.1.1): a connection that used them up takes no more.
        if id >= Int32.max - 2 { phase = .draining }
        let sentAt = NIODeadline.now()
        let deadline = sentAt + TimeAmount(request.timeout)
        streams[id] = Stream(
            transfer: transfer, responseLimit: max(0, request.maximumResponseBytes ?? configuration.maximumResponseBytes),
            sentAt: sentAt, deadline: deadline)
        armTimeoutCheck(for: deadline)
        scheduleFlush()
    }

    /// One timer for every stream's timeout, set for the earliest deadline: a timer per request cost an insertion
    /// into the event loop's queue of scheduled tasks and, once answered, a cancel that searches that queue.
    /// Requests mostly share one timeout, so a later request's deadline is later and leaves the timer as it is.
    private func armTimeoutCheck(for deadline: NIODeadline) {
        if let check = timeoutCheck, check.deadline <= deadline { return }
        timeoutCheck?.timer.cancel()
        let timer = eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
            timeoutCheck = nil
            expireStreams()
        }
        timeoutCheck = (deadline, timer)
    }

    /// Fails the streams whose deadline passed; the timer then waits for the earliest deadline left.
    private func expireStreams() {
        let now = NIODeadline.now()
        for (id, stream) in streams where stream.deadline <= now {
            end(id, resetting: true, with: .failure(.timedOut))
            if lastRead < stream.sentAt { checkAlive() }
        }
        if let earliest = streams.values.lazy.map(\.deadline).min() { armTimeoutCheck(for: earliest) }
    }

    private func cancelTimeoutCheck() {
        timeoutCheck?.timer.cancel()
        timeoutCheck = nil
    }

    /// True if the request was on this connection and is now cancelled.
    func cancel(_ requestID: UInt64) -> Bool {
        guard let id = streams.first(where: { $0.value.transfer.id == requestID })?.key else { return false }
        end(id, resetting: true, with: .failure(.cancelled))
        return true
    }

    /// Ends a stream once: answers its caller, frees its place, and resets it at the server if it is still open there.
    private func end(
        _ id: Int32, resetting: Bool, with result: Result<HTTPResponse, HTTPTransportError>?,
        handingBack: Bool = false
    ) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        if resetting, let framing {
            framing.resetStream(id)
            scheduleFlush()
        }
        if handingBack {
            pool?.streamEnded(handingBack: stream.transfer)
        } else {
            if stream.status != nil { hasAnswered = true }
            pool?.requestFinished(stream.transfer.id)
            stream.transfer.complete(result ?? .success(stream.response))
            pool?.streamEnded()
        }
        if streams.isEmpty {
            idleSince = NIODeadline.now()
            if phase == .draining { context?.close(promise: nil) } else { armIdleCheck() }
        }
        pool?.dispatch()
    }

    /// Not a byte from the server during a whole request timeout, or for `keepaliveInterval`: a PING (RFC 9113 §6.7)
    /// asks whether the connection still lives; without an answer in `pingTimeout` it is closed, so its requests fail
    /// now instead of each waiting out its own timeout on a peer or NAT that vanished, and an idle one is replaced
    /// before a request is lost on it.
    private func checkAlive() {
        guard pingInFlight == nil, phase == .ready || phase == .draining, let framing else { return }
        let pingSentAt = NIODeadline.now()
        pingInFlight = pingSentAt
        framing.sendPing()
        scheduleFlush()
        eventLoop.assumeIsolated().scheduleTask(in: pingTimeout) { [self] in
            if pingInFlight == pingSentAt { pingInFlight = nil }
            guard lastRead < pingSentAt, phase == .ready || phase == .draining else { return }
            let error = HTTPTransportError.connectionFailed("no answer to a PING within \(pingTimeout)")
            lastError = error
            // TLS waits for the peer's close_notify before the socket closes: meanwhile nothing may use the connection.
            phase = .draining
            for id in Array(streams.keys) { end(id, resetting: false, with: .failure(error)) }
            self.context?.close(promise: nil)
            pool?.dispatch()
        }
    }

    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        // After the requests already submitted in this tick, so a burst leaves in one write.
        eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            framing?.flush()
        }
    }

    // MARK: What the framing reports

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // Application data reaches the framing below; nothing arrives here.
    }

    func framingReceivedBytes() {
        lastRead = NIODeadline.now()
        // Whatever arrived answers the PING in flight (its timer compares `lastRead` with when it was sent).
        pingInFlight = nil
    }

    func received(field name: String, value: String, on id: Int32) {
        guard let stream = streams[id] else { return }
        switch stream.block {
        case .awaitingStatus:
            guard name == ":status" else { return }
            guard let status = Int(value), (100...999).contains(status) else {
                end(id, resetting: true, with: .failure(.protocolError("an answer without a valid :status")))
                return
            }
            if status < 200 {
                stream.block = .informational
            } else {
                stream.status = status
                stream.block = .answer
            }
        case .answer:
            guard !name.hasPrefix(":") else { return }
            stream.headerBytes += name.utf8.count + value.utf8.count + 4
            guard stream.headers.count < HTTPResponse.maximumHeaderCount, stream.headerBytes <= HTTPResponse.maximumHeaderBytes else {
                stream.block = .after
                return
            }
            stream.headers.append((Self.lowercased(name), value))
        case .informational, .after:
            return
        }
    }

    func receivedFieldSectionBeyondLimit(on id: Int32) {
        let limit = HTTP2ClientSettings.maximumHeaderListSize >> 10
        end(
            id, resetting: true,
            with: .failure(.protocolError("the answer's header fields exceed \(limit) KiB (SETTINGS_MAX_HEADER_LIST_SIZE)")))
    }

    func receivedEndOfHeaders(on id: Int32, endStream: Bool) {
        guard let stream = streams[id] else { return }
        switch stream.block {
        case .awaitingStatus:
            end(id, resetting: true, with: .failure(.protocolError("an answer without a valid :status")))
            return
        case .informational:
            stream.block = .awaitingStatus
        case .answer, .after:
            stream.block = .after
        }
        if endStream { end(id, resetting: false, with: nil) }
    }

    func received(body bytes: UnsafeRawBufferPointer, endStream: Bool, on id: Int32) {
        guard let stream = streams[id] else { return }
        let room = stream.responseLimit - stream.body.count
        if bytes.count > room {
            stream.body.append(contentsOf: bytes.prefix(room))
            stream.truncated = true
            end(id, resetting: !endStream, with: nil)
            return
        }
        stream.body.append(contentsOf: bytes)
        if endStream { end(id, resetting: false, with: nil) }
    }

    func receivedEndOfStream(on id: Int32) { end(id, resetting: false, with: nil) }

    func receivedReset(on id: Int32, code: UInt32) {
        guard let stream = streams[id] else { return }
        if code == HTTP2ClientSettings.refusedStream {
            end(id, resetting: false, with: nil, handingBack: true)
        } else if code == HTTP2ClientSettings.noError, stream.status != nil {
            // A complete answer followed by RST_STREAM(NO_ERROR) (nginx, when it did not read the whole body) is still an answer.
            end(id, resetting: false, with: nil)
        } else {
            end(
                id, resetting: false,
                with: .failure(.protocolError("the server reset the stream (\(HTTP2FramingKind.describe(errorCode: code)))")))
        }
    }

    func streamClosed(_ id: Int32, code: UInt32) {
        guard let stream = streams[id] else { return }
        if code == HTTP2ClientSettings.refusedStream {
            // Not processed by the server (RFC 9113 §8.7): sent again.
            end(id, resetting: false, with: nil, handingBack: true)
        } else if stream.status != nil, code == HTTP2ClientSettings.noError {
            end(id, resetting: false, with: nil)
        } else {
            let why = code == HTTP2ClientSettings.noError ? "without an answer" : HTTP2FramingKind.describe(errorCode: code)
            end(id, resetting: false, with: .failure(.protocolError("the stream closed (\(why))")))
        }
    }

    func receivedMaximumConcurrentStreams(_ value: Int) {
        capacity = min(configuration.maximumStreamsPerConnection, max(0, value))
        pool?.dispatch()
    }

    /// Streams above the server's last processed one were never seen by it: they go back to the pool to be sent again.
    func receivedGoAway(lastStreamID: Int32) {
        if phase == .ready { phase = .draining }
        for id in streams.keys where id > lastStreamID {
            end(id, resetting: false, with: nil, handingBack: true)
        }
        if streams.isEmpty { context?.close(promise: nil) }
        pool?.dispatch()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        lastError = error
        if phase == .ready { phase = .draining }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let wasConnecting = phase == .connecting
        phase = .closed
        cancelTimers()
        let error = Self.transportError(lastError)
        for id in Array(streams.keys) {
            end(id, resetting: false, with: .failure(.connectionFailed("the connection closed with the request in flight: \(error)")))
        }
        if wasConnecting { pool?.connectionFailed(self, error) } else { pool?.connectionClosed(self) }
        self.context = nil
        framing = nil
        context.fireChannelInactive()
    }

    /// Fails what is in flight with `.shutDown` and closes the connection, telling the pool nothing (it is going away).
    func shutdown() {
        pool = nil
        phase = .closed
        cancelTimers()
        for stream in streams.values { stream.transfer.complete(.failure(.shutDown)) }
        streams.removeAll()
        channel?.close(promise: nil)
    }

    static func transportError(_ error: (any Error)?) -> HTTPTransportError {
        switch error {
        case .none: .connectionFailed("closed by the server")
        case let error as NIOSSLError: .tls("\(error)")
        case let error as BoringSSLError: .tls("\(error)")
        case let error as NIOSSLExtraError: .tls("\(error)")
        case let error as HTTPTransportError: error
        case let error as ChannelError:
            if case .connectTimeout = error { .timedOut } else { .connectionFailed("\(error)") }
        case let error?: .connectionFailed("\(error)")
        }
    }
}

import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// One connection to one Redis node, owned by one event loop: commands are written and their replies read as they
/// arrive (RESP, by hiredis' reader), never blocking a thread. One round trip at a time: the requests that arrive while
/// one is out wait in the inbox, without waking the loop, and all go out in one write once its last reply is in. Under
/// load every round trip carries the requests of many callers at the cost of one write, one read and no wake-up each.
///
/// The connection opens on first use and again on the first use after it broke: TCP (bounded by the connect timeout),
/// TLS for `rediss://`, then `AUTH` and `SELECT` before any caller's command. A broken connection, an unverifiable
/// certificate, a refused `AUTH` or a reply that does not come within the command timeout fails every request on it with
/// `.unavailable` (they may have run) and closes it.
///
/// All state but the inbox is confined to the event loop.
final class RedisNodeConnection: @unchecked Sendable {
    typealias Completion = @Sendable (Result<[RedisValue], RedisError>) -> Void

    /// Who gets a request's replies: a task waiting for them, or a completion called on the event loop, in reply order.
    enum Waiter: Sendable {
        case task(CheckedContinuation<Result<[RedisValue], RedisError>, Never>)
        case completion(Completion)

        func complete(_ result: Result<[RedisValue], RedisError>) {
            switch self {
            case .task(let continuation): continuation.resume(returning: result)
            case .completion(let completion): completion(result)
            }
        }
    }

    struct Request: Sendable {
        var commands: [RedisCommand]
        var waiter: Waiter
        /// A write to be acknowledged by a replica: `WAIT 1 <ms>` follows the write it goes out in, and its answer is
        /// appended to the request's replies.
        var replicaWait: Int64?
    }

    struct Endpoint: Sendable {
        var address: RedisNodeAddress
        var url: RedisURL
        var connectTimeout: Duration
        var commandTimeout: Duration
        var tls: RedisTLSContexts?
        var serverName: String?
    }

    let eventLoop: any EventLoop
    private let endpoint: Endpoint
    private let inbox = Mutex(Inbox())

    private struct Inbox {
        var requests: [Request] = []
        /// A round trip is out (or the connection is opening): the loop takes the inbox when it ends.
        var busy = false
    }

    private enum State {
        case idle
        /// Opening, then `AUTH`/`SELECT`: requests wait in `waitingForConnection`.
        case connecting
        case connected(any Channel)
        case shutDown
    }

    /// What the replies to come answer, in order.
    private struct Expected {
        enum Kind {
            /// `AUTH`/`SELECT` of a new connection.
            case setup(count: Int)
            case replies(Waiter, count: Int, acknowledged: Bool)
            /// The `WAIT` after the acknowledged requests of one write.
            case acknowledgement
        }

        var kind: Kind
        var deadline: NIODeadline
    }

    private var state = State.idle
    private var waitingForConnection: [Request] = []
    private var expected = CircularBuffer<Expected>()
    /// The replies received so far for the first of `expected`.
    private var collected: [RedisValue] = []
    /// Requests whose replies all came, waiting for the answer of the `WAIT` that followed them.
    private var awaitingAcknowledgement: [(Waiter, [RedisValue])] = []
    private var deadlineCheck: Scheduled<Void>?

    init(endpoint: Endpoint, eventLoop: any EventLoop) {
        self.endpoint = endpoint
        self.eventLoop = eventLoop
    }

    /// From any thread.
    func submit(_ request: Request) {
        let wake = inbox.withLock { inbox in
            inbox.requests.append(request)
            defer { inbox.busy = true }
            return !inbox.busy
        }
        if wake { eventLoop.execute { self.drainInbox() } }
    }

    /// Closes the connection; what it carries fails, and so does anything submitted later.
    func shutdown() {
        eventLoop.execute {
            let channel: (any Channel)? = if case .connected(let channel) = self.state { channel } else { nil }
            self.fail(.unavailable("the Redis client was shut down"), next: .shutDown)
            channel?.close(promise: nil)
        }
    }

    // MARK: On the event loop

    /// Starts the next round trip with everything in the inbox, or marks the connection idle when it is empty.
    private func drainInbox() {
        let requests = inbox.withLock { inbox in
            defer { inbox.requests.removeAll(keepingCapacity: true) }
            if inbox.requests.isEmpty { inbox.busy = false }
            return inbox.requests
        }
        guard !requests.isEmpty else { return }
        switch state {
        case .connected(let channel):
            write(requests, on: channel)
        case .connecting:
            waitingForConnection += requests
        case .idle:
            waitingForConnection += requests
            connect()
        case .shutDown:
            for request in requests { request.waiter.complete(.failure(.unavailable("the Redis client was shut down"))) }
            drainInbox()
        }
    }

    /// The round trip's last reply came, or it failed: the next one starts.
    private func roundTripEnded() {
        guard expected.isEmpty else { return }
        drainInbox()
    }

    private func write(_ requests: [Request], on channel: any Channel) {
        let deadline = NIODeadline.now() + TimeAmount(endpoint.commandTimeout)
        var buffer = channel.allocator.buffer(capacity: requests.reduce(0) { $0 + $1.commands.reduce(0) { $0 + $1.encoded.count } } + 32)
        var replicaWait: Int64?
        for request in requests {
            for command in request.commands { buffer.writeBytes(command.encoded) }
            let acknowledged = request.replicaWait != nil
            if let wait = request.replicaWait { replicaWait = max(replicaWait ?? wait, wait) }
            expected.append(
                Expected(kind: .replies(request.waiter, count: request.commands.count, acknowledged: acknowledged), deadline: deadline))
        }
        if let replicaWait {
            buffer.writeBytes(RedisCommand("WAIT", "1", String(replicaWait)).encoded)
            expected.append(Expected(kind: .acknowledgement, deadline: deadline))
        }
        channel.writeAndFlush(buffer, promise: nil)
        armDeadlineCheck()
    }

    private func connect() {
        state = .connecting
        let sslContext: NIOSSLContext?
        do throws(RedisError) {
            sslContext = try endpoint.tls?.context()
        } catch {
            return fail(error, next: .idle)
        }
        let serverName = endpoint.serverName
        let bootstrap = ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(endpoint.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelInitializer { [self] channel in
                channel.eventLoop.makeCompletedFuture {
                    if let sslContext {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                    }
                    try channel.pipeline.syncOperations.addHandler(RedisReplyHandler(connection: self, address: endpoint.address))
                }
            }
        bootstrap.connect(host: endpoint.address.host, port: endpoint.address.port).whenComplete { [self] result in
            switch result {
            case .success(let channel): opened(channel)
            case .failure(let error):
                fail(.unavailable("connect to \(endpoint.address): \(RedisReplyHandler.describe(error))"), next: .idle)
            }
        }
    }

    private func opened(_ channel: any Channel) {
        guard case .connecting = state else { return channel.close(promise: nil) }
        connectingChannel = channel
        guard endpoint.tls != nil else { return authenticate(channel) }
        // A plain-text Redis answers nothing to a TLS hello (it waits for the end of an inline command): the handshake
        // gets the connect timeout, then the connection fails saying what it met.
        handshakeDeadline = eventLoop.scheduleTask(in: TimeAmount(endpoint.connectTimeout)) { [self] in
            broke(
                channel,
                .unavailable(
                    "\(endpoint.address) completed no TLS handshake within \(endpoint.connectTimeout): the server does not speak TLS (is the port of PUSH_REDIS_URL's rediss:// a TLS port?) or does not answer"
                ))
        }
    }

    /// The TLS handshake on `channel` succeeded: the server's certificate and name are verified.
    func handshakeCompleted(on channel: any Channel) {
        guard case .connecting = state, connectingChannel === channel else { return }
        handshakeDeadline?.cancel()
        handshakeDeadline = nil
        authenticate(channel)
    }

    private var handshakeDeadline: Scheduled<Void>?

    private func authenticate(_ channel: any Channel) {
        let url = endpoint.url
        var setup: [RedisCommand] = []
        if let password = url.password {
            setup.append(url.username.map { RedisCommand("AUTH", $0, password) } ?? RedisCommand("AUTH", password))
        }
        if url.database != 0 { setup.append(RedisCommand("SELECT", String(url.database))) }
        guard !setup.isEmpty else { return ready(channel) }
        // Callers' commands wait for the answer: behind a refused AUTH they would only meet NOAUTH.
        var buffer = channel.allocator.buffer(capacity: 64)
        for command in setup { buffer.writeBytes(command.encoded) }
        expected.append(Expected(kind: .setup(count: setup.count), deadline: .now() + TimeAmount(endpoint.commandTimeout)))
        channel.writeAndFlush(buffer, promise: nil)
        armDeadlineCheck()
    }

    /// The channel of a connection still sending `AUTH`/`SELECT`.
    private var connectingChannel: (any Channel)?

    private func ready(_ channel: any Channel) {
        connectingChannel = nil
        state = .connected(channel)
        let waiting = waitingForConnection
        waitingForConnection = []
        if waiting.isEmpty { drainInbox() } else { write(waiting, on: channel) }
    }

    /// A reply arrived on `channel`.
    func received(_ reply: RedisValue, on channel: any Channel) {
        guard isCurrent(channel) else { return }
        guard let first = expected.first else {
            return broke(channel, .unavailable("\(endpoint.address) sent a reply nobody asked for"))
        }
        switch first.kind {
        case .setup(let count):
            collected.append(reply)
            guard collected.count == count else { return }
            expected.removeFirst()
            let replies = collected
            collected = []
            if case .error(let message)? = replies.first(where: { if case .error = $0 { true } else { false } }) {
                return broke(channel, .unavailable("\(RedisError.setupRefused) by \(endpoint.address) for \(endpoint.url): \(message)"))
            }
            ready(channel)
        case .replies(let waiter, let count, let acknowledged):
            collected.append(reply)
            guard collected.count == count else { return }
            expected.removeFirst()
            let replies = collected
            collected = []
            if acknowledged { awaitingAcknowledgement.append((waiter, replies)) } else { waiter.complete(.success(replies)) }
            roundTripEnded()
        case .acknowledgement:
            expected.removeFirst()
            let waiting = awaitingAcknowledgement
            awaitingAcknowledgement = []
            for (waiter, replies) in waiting { waiter.complete(.success(replies + [reply])) }
            roundTripEnded()
        }
    }

    /// `channel` failed (`error`) or closed.
    func broke(_ channel: any Channel, _ error: RedisError) {
        guard isCurrent(channel) else { return }
        fail(error, next: .idle)
        channel.close(promise: nil)
    }

    private func isCurrent(_ channel: any Channel) -> Bool {
        switch state {
        case .connected(let current): current === channel
        case .connecting: connectingChannel === channel
        case .idle, .shutDown: false
        }
    }

    /// Fails everything the connection carries or holds, and moves to `next`.
    private func fail(_ error: RedisError, next: State) {
        state = next
        connectingChannel = nil
        handshakeDeadline?.cancel()
        handshakeDeadline = nil
        deadlineCheck?.cancel()
        deadlineCheck = nil
        let failed = expected
        expected.removeAll()
        collected = []
        let acknowledging = awaitingAcknowledgement
        awaitingAcknowledgement = []
        let waiting = waitingForConnection
        waitingForConnection = []
        for entry in failed {
            if case .replies(let waiter, _, _) = entry.kind { waiter.complete(.failure(error)) }
        }
        for (waiter, _) in acknowledging { waiter.complete(.failure(error)) }
        for request in waiting { request.waiter.complete(.failure(error)) }
        // What arrived meanwhile goes next: on a connection opened again, or failed at once after a shutdown.
        drainInbox()
    }

    private func armDeadlineCheck() {
        guard deadlineCheck == nil, let first = expected.first else { return }
        deadlineCheck = eventLoop.scheduleTask(deadline: first.deadline) { [self] in
            deadlineCheck = nil
            guard let first = expected.first else { return }
            guard first.deadline <= .now() else { return armDeadlineCheck() }
            let channel: (any Channel)? =
                switch state {
                case .connected(let channel): channel
                case .connecting: connectingChannel
                case .idle, .shutDown: nil
                }
            guard let channel else { return }
            broke(channel, .unavailable("\(endpoint.address) did not answer within \(endpoint.commandTimeout)"))
        }
    }
}

/// Reads a connection's replies and reports how it ended.
final class RedisReplyHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    private let connection: RedisNodeConnection
    private let address: RedisNodeAddress
    private let reader = RedisReplyReader()

    init(connection: RedisNodeConnection, address: RedisNodeAddress) {
        self.connection = connection
        self.address = address
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        do throws(RedisError) {
            try buffer.withUnsafeReadableBytes { (bytes) throws(RedisError) in try reader.feed(bytes) }
            while let reply = try reader.next() { connection.received(reply, on: context.channel) }
        } catch {
            connection.broke(context.channel, error)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted? = event as? TLSUserEvent { connection.handshakeCompleted(on: context.channel) }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        connection.broke(context.channel, .unavailable("\(address): \(Self.describe(error))"))
    }

    func channelInactive(context: ChannelHandlerContext) {
        connection.broke(context.channel, .unavailable("\(address) closed the connection"))
        context.fireChannelInactive()
    }

    /// An error of the socket or of TLS in words an operator can act on.
    static func describe(_ error: any Error) -> String {
        let text = "\(error)"
        if let tls = error as? NIOSSLError {
            if text.contains("wrong version number") || text.contains("packet length too long") || text.contains("http request") {
                return "the server does not speak TLS (is the port of PUSH_REDIS_URL's rediss:// a TLS port?): \(tls)"
            }
            if text.contains("certificate verify failed") || text.contains("CERTIFICATE_VERIFY_FAILED") {
                return
                    "its TLS certificate cannot be verified (check PUSH_REDIS_CA_FILE, and PUSH_REDIS_TLS_SERVER_NAME where nodes announce IP addresses): \(tls)"
            }
            return "TLS failed: \(tls)"
        }
        if let tls = error as? NIOSSLExtraError { return "TLS failed: \(tls)" }
        if let validation = error as? BoringSSLError { return "TLS failed: \(validation)" }
        return text
    }
}

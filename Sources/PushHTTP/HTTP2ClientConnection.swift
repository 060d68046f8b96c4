import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import PushCore

/// One HTTP/2 connection over TLS: the channel handler above `NIOHTTP2Handler` that writes each
/// request as frames on a stream of its own and puts the answer together from the frames that come
/// back. Lives on the transport's event loop.
///
/// Without NIO's per-stream channels, flow control of what the server sends is ours: the
/// connection window is raised at start and topped up as the handler reports it used (RFC 9113 §6.9).
final class HTTP2ClientConnection: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private enum Phase {
        case connecting
        case ready
        /// GOAWAY received (or stream ids used up): no new streams; closes once the open ones end.
        case draining
        case closed
    }

    /// One request's stream and its answer so far.
    private final class Stream {
        let transfer: HTTP2Transfer
        let responseLimit: Int
        var status: Int?
        var headers: [(name: String, value: String)] = []
        var headerBytes = 0
        var body: [UInt8] = []
        var truncated = false
        var timeout: Scheduled<Void>?

        init(transfer: HTTP2Transfer, responseLimit: Int) {
            self.transfer = transfer
            self.responseLimit = responseLimit
        }

        var response: HTTPResponse { HTTPResponse(status: status ?? 0, headers: headers, body: body, bodyTruncated: truncated) }
    }

    static let connectionWindow = 4 << 20
    static let streamWindow = 1 << 20
    static let maximumHeaderListSize = 64 << 10
    /// Fields HTTP/2 forbids or carries otherwise (RFC 9113 §8.2.2; `host` becomes `:authority`).
    private static func isConnectionSpecific(_ name: String) -> Bool {
        switch name {
        case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host", "te": true
        default: false
        }
    }

    /// HTTP/2 field names are lower case (RFC 9113 §8.2.1): the plugins' names and the server's
    /// (which `NIOHTTP2Handler` checks) already are, so most need no copy.
    private static func lowercased(_ name: String) -> String {
        let hasUpperCase = name.utf8.withContiguousStorageIfAvailable { $0.contains { $0 >= 0x41 && $0 <= 0x5A } }
            ?? name.utf8.contains { $0 >= 0x41 && $0 <= 0x5A }
        return hasUpperCase ? name.lowercased() : name
    }

    private weak var origin: HTTP2Origin?
    private let configuration: HTTPTransportConfiguration
    private let eventLoop: any EventLoop
    private var phase = Phase.connecting
    private var context: ChannelHandlerContext?
    private var channel: (any Channel)?
    private var streams: [HTTP2StreamID: Stream] = [:]
    private var nextStreamID: Int32 = 1
    private var flushScheduled = false
    private var lastError: (any Error)?
    private var handshakeTimeout: Scheduled<Void>?
    private var idleSince = NIODeadline.now()
    private var lastRead = NIODeadline.now()
    private var pingOutstanding = false
    private var fieldIndexing = FieldIndexing()
    static let pingTimeout = TimeAmount.seconds(5)
    private(set) var capacity: Int

    init(origin: HTTP2Origin, configuration: HTTPTransportConfiguration, eventLoop: any EventLoop) {
        self.origin = origin
        self.configuration = configuration
        self.eventLoop = eventLoop
        capacity = configuration.maximumStreamsPerConnection
    }

    var openStreams: Int { streams.count }

    /// Ready for a new stream; a connection idle beyond `maximumIdleTime` is closed here instead of reused.
    var acceptsStreams: Bool {
        guard phase == .ready else { return false }
        if streams.isEmpty, NIODeadline.now() - idleSince > TimeAmount(configuration.maximumIdleTime) {
            phase = .draining
            context?.close(promise: nil)
            return false
        }
        return true
    }
    var isConnecting: Bool { phase == .connecting }
    var isUsable: Bool { phase == .connecting || phase == .ready }

    // MARK: Connecting

    func connect(to key: HTTP2Origin.Key) {
        let sslContext: NIOSSLContext
        do {
            sslContext = try NIOSSLContext(configuration: Self.tlsConfiguration(key.tls))
        } catch {
            phase = .closed
            // Reported on the next turn of the loop: the origin is in the middle of opening this connection.
            let failure = HTTPTransportError.tls("\(error)")
            eventLoop.assumeIsolated().execute { [self] in origin?.connectionFailed(self, failure) }
            return
        }
        let serverHostname = HTTPSTarget.isIPAddress(key.host) ? nil : key.host
        let bound = NIOLoopBound(self, eventLoop: eventLoop)
        let timeout = min(configuration.connectTimeout, .seconds(3600))
        handshakeTimeout = eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(timeout)) { [self] in
            guard phase == .connecting else { return }
            lastError = ChannelError.connectTimeout(TimeAmount(timeout))
            channel?.close(promise: nil)
        }
        ClientBootstrap(group: eventLoop)
            .connectTimeout(TimeAmount(timeout))
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelOption(.socketOption(.so_keepalive), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let tls = try NIOSSLClientHandler(context: sslContext, serverHostname: serverHostname)
                    try channel.pipeline.syncOperations.addHandlers([tls, bound.value])
                }
            }
            .connect(host: key.host, port: key.port)
            .assumeIsolated()
            .whenComplete { [self] result in
                switch result {
                case .success(let channel):
                    if phase == .closed { channel.close(promise: nil) } else { self.channel = channel }
                case .failure(let error):
                    guard phase == .connecting else { return }
                    phase = .closed
                    handshakeTimeout?.cancel()
                    origin?.connectionFailed(self, Self.transportError(lastError ?? error))
                }
            }
    }

    static func tlsConfiguration(_ options: TLSOptions) throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2", "http/1.1"]
        tls.certificateVerification = .fullVerification
        if let caFile = options.caFile { tls.trustRoots = .file(caFile) }
        let password = options.clientKeyPassword.map { Array($0.utf8) }
        if let certificateFile = options.clientCertificateFile {
            switch options.clientCertificateFormat {
            case .pkcs12:
                let bundle = try NIOSSLPKCS12Bundle(file: certificateFile, passphrase: password)
                tls.certificateChain = bundle.certificateChain.map { .certificate($0) }
                tls.privateKey = .privateKey(bundle.privateKey)
            case .pem:
                tls.certificateChain = try NIOSSLCertificate.fromPEMFile(certificateFile).map { .certificate($0) }
                let keyFile = options.clientKeyFile ?? certificateFile
                if let password {
                    tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyFile, format: .pem) { $0(password) })
                } else {
                    tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: keyFile, format: .pem))
                }
            }
        }
        return tls
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiated) = event as? TLSUserEvent {
            handshakeCompleted(context: context, negotiated: negotiated)
        } else if let closed = event as? StreamClosedEvent {
            streamClosed(closed.streamID, reason: closed.reason)
        } else if let window = event as? NIOHTTP2WindowUpdatedEvent {
            inboundWindowChanged(window)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    private func handshakeCompleted(context: ChannelHandlerContext, negotiated: String?) {
        handshakeTimeout?.cancel()
        guard phase == .connecting else { return }
        guard negotiated == "h2" else {
            phase = .closed
            origin?.connectionSpeaksOnlyHTTP1(self)
            context.close(promise: nil)
            return
        }
        var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
        connectionConfiguration.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 0),
            HTTP2Setting(parameter: .initialWindowSize, value: Self.streamWindow),
            HTTP2Setting(parameter: .maxHeaderListSize, value: Self.maximumHeaderListSize),
        ]
        // `start` writes only fields `HTTPRequest` validated, and `received` reads only `:status` (checked there) and copies
        // the rest as opaque text; NIO's own check of every field in both directions cost about 5 % of a request's CPU.
        connectionConfiguration.headerBlockValidation = .disabled
        do {
            // Added only now, inside the handshake event, so the server's preface reaches it (NOTES: else ReceivedBadSettings).
            try context.pipeline.syncOperations.addHandler(NIOHTTP2Handler(mode: .client, connectionConfiguration: connectionConfiguration),
                                                           position: .before(self))
        } catch {
            lastError = error
            context.close(promise: nil)
            return
        }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream,
                                                 payload: .windowUpdate(windowSizeIncrement: Self.connectionWindow - 65_535))),
                      promise: nil)
        context.flush()
        phase = .ready
        idleSince = NIODeadline.now()
        origin?.connectionReady()
    }

    // MARK: Requests

    func start(_ transfer: HTTP2Transfer) {
        guard let context, phase == .ready else {
            origin?.streamEnded(handingBack: transfer)
            return
        }
        let id = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        if nextStreamID > Int32.max - 2 { phase = .draining }
        let request = transfer.request
        let stream = Stream(transfer: transfer, responseLimit: max(0, request.maximumResponseBytes ?? configuration.maximumResponseBytes))
        streams[id] = stream
        let sentAt = NIODeadline.now()

        var headers = HPACKHeaders()
        headers.reserveCapacity(request.headers.count + 5)
        headers.add(name: ":method", value: request.method)
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: transfer.target.authority)
        // A device token or a subscription makes most paths unique: indexed, each would push a reusable field
        // (the provider token, the topic) out of the HPACK table and cost the next request its full text.
        headers.add(name: ":path", value: transfer.target.path, indexing: .nonIndexable)
        var hasContentLength = false
        for header in request.headers {
            let name = Self.lowercased(header.name)
            guard !Self.isConnectionSpecific(name) else { continue }
            if name == "content-length" { hasContentLength = true }
            headers.add(name: name, value: header.value, indexing: fieldIndexing.indexing(name: name, value: header.value))
        }
        let hasBody = request.method != "GET" && request.method != "HEAD"
        if hasBody && !hasContentLength {
            let length = String(request.body.count)
            headers.add(name: "content-length", value: length, indexing: fieldIndexing.indexing(name: "content-length", value: length))
        }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: !hasBody)))), promise: nil)
        if hasBody {
            let body = context.channel.allocator.buffer(bytes: request.body)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true)))),
                          promise: nil)
        }
        stream.timeout = eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(request.timeout)) { [self] in
            end(id, resetting: true, with: .failure(.timedOut))
            if lastRead < sentAt { checkAlive() }
        }
        scheduleFlush()
    }

    /// True if the request was on this connection and is now cancelled.
    func cancel(_ requestID: UInt64) -> Bool {
        guard let id = streams.first(where: { $0.value.transfer.id == requestID })?.key else { return false }
        end(id, resetting: true, with: .failure(.cancelled))
        return true
    }

    /// Ends a stream once: answers its caller, frees its place, and resets it at the server if it is still open there.
    private func end(_ id: HTTP2StreamID, resetting: Bool, with result: Result<HTTPResponse, HTTPTransportError>?,
                     handingBack: Bool = false) {
        guard let stream = streams.removeValue(forKey: id) else { return }
        stream.timeout?.cancel()
        if resetting, let context {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .rstStream(.cancel))), promise: nil)
            scheduleFlush()
        }
        if handingBack {
            origin?.streamEnded(handingBack: stream.transfer)
        } else {
            origin?.requestFinished(stream.transfer.id)
            stream.transfer.complete(result ?? .success(stream.response))
            origin?.streamEnded()
        }
        if streams.isEmpty {
            idleSince = NIODeadline.now()
            if phase == .draining { context?.close(promise: nil) }
        }
        origin?.dispatch()
    }

    /// Not a byte from the server during a whole request timeout: a PING (RFC 9113 §6.7) asks whether
    /// the connection still lives; without an answer in `pingTimeout` it is closed, so its other
    /// requests fail now instead of each waiting out its own timeout on a peer or NAT that vanished.
    private func checkAlive() {
        guard !pingOutstanding, phase == .ready || phase == .draining, let context else { return }
        pingOutstanding = true
        let pingSentAt = NIODeadline.now()
        context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 1), ack: false))),
                      promise: nil)
        scheduleFlush()
        eventLoop.assumeIsolated().scheduleTask(in: Self.pingTimeout) { [self] in
            pingOutstanding = false
            guard lastRead < pingSentAt, phase == .ready || phase == .draining else { return }
            let error = HTTPTransportError.connectionFailed("no answer to a PING within \(Self.pingTimeout)")
            lastError = error
            // TLS waits for the peer's close_notify before the socket closes: meanwhile nothing may use the connection.
            phase = .draining
            for id in Array(streams.keys) { end(id, resetting: false, with: .failure(error)) }
            self.context?.close(promise: nil)
            origin?.dispatch()
        }
    }

    private func scheduleFlush() {
        guard !flushScheduled else { return }
        flushScheduled = true
        // After the requests already submitted in this tick, so a burst leaves in one write.
        eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            context?.flush()
        }
    }

    // MARK: Frames from the server

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        lastRead = NIODeadline.now()
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            received(headers.headers, endStream: headers.endStream, on: frame.streamID)
        case .data(let data):
            received(data, on: frame.streamID)
        case .rstStream(let code):
            resetByServer(frame.streamID, code: code)
        case .goAway(let lastStreamID, _, _):
            goAway(lastStreamID: lastStreamID)
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                capacity = min(configuration.maximumStreamsPerConnection, max(0, setting.value))
            }
            origin?.dispatch()
        default:
            break
        }
    }

    private func received(_ headers: HPACKHeaders, endStream: Bool, on id: HTTP2StreamID) {
        guard let stream = streams[id] else { return }
        if stream.status == nil {
            guard let status = headers.first(name: ":status").flatMap({ Int($0) }), (100...999).contains(status) else {
                end(id, resetting: true, with: .failure(.protocolError("an answer without a valid :status")))
                return
            }
            if status < 200 { return }  // informational (100 Continue, 103 Early Hints): the answer follows
            stream.status = status
            for (name, value, _) in headers where !name.hasPrefix(":") {
                stream.headerBytes += name.utf8.count + value.utf8.count + 4
                guard stream.headers.count < HTTPResponse.maximumHeaderCount, stream.headerBytes <= HTTPResponse.maximumHeaderBytes else { break }
                stream.headers.append((Self.lowercased(name), value))
            }
        }
        if endStream { end(id, resetting: false, with: nil) }
    }

    /// Keeps the server able to send: once half of a window is used, it is topped up to its full size. The
    /// handler reports the windows as they are, DATA of streams already reset included (those frames never
    /// reach `channelRead`, but they use the connection's window all the same).
    private func inboundWindowChanged(_ event: NIOHTTP2WindowUpdatedEvent) {
        guard let remaining = event.inboundWindowSize, let context else { return }
        let target: Int
        if event.streamID == .rootStream {
            target = Self.connectionWindow
        } else if let stream = streams[event.streamID], !stream.truncated {
            target = Self.streamWindow
        } else {
            return
        }
        guard remaining <= target / 2 else { return }
        context.write(wrapOutboundOut(HTTP2Frame(streamID: event.streamID, payload: .windowUpdate(windowSizeIncrement: target - remaining))),
                      promise: nil)
        scheduleFlush()
    }

    private func received(_ data: HTTP2Frame.FramePayload.Data, on id: HTTP2StreamID) {
        guard let stream = streams[id], case .byteBuffer(let buffer) = data.data else { return }
        let room = stream.responseLimit - stream.body.count
        if buffer.readableBytes > room {
            buffer.withUnsafeReadableBytes { stream.body.append(contentsOf: $0.prefix(room)) }
            stream.truncated = true
            end(id, resetting: !data.endStream, with: nil)
            return
        }
        buffer.withUnsafeReadableBytes { stream.body.append(contentsOf: $0) }
        if data.endStream { end(id, resetting: false, with: nil) }
    }

    private func resetByServer(_ id: HTTP2StreamID, code: HTTP2ErrorCode) {
        guard let stream = streams[id] else { return }
        if code == .refusedStream {
            end(id, resetting: false, with: nil, handingBack: true)
        } else if code == .noError, stream.status != nil {
            // A complete answer followed by RST_STREAM(NO_ERROR) (nginx, when it did not read the whole body) is still an answer.
            end(id, resetting: false, with: nil)
        } else {
            end(id, resetting: false, with: .failure(.protocolError("the server reset the stream (\(code))")))
        }
    }

    private func streamClosed(_ id: HTTP2StreamID, reason: HTTP2ErrorCode?) {
        guard let stream = streams[id] else { return }
        if stream.status != nil, reason == nil || reason == .noError {
            end(id, resetting: false, with: nil)
        } else {
            let why = reason.map { "\($0)" } ?? "without an answer"
            end(id, resetting: false, with: .failure(.protocolError("the stream closed (\(why))")))
        }
    }

    /// Streams above the server's last processed one were never seen by it: they go back to the origin to be sent again.
    private func goAway(lastStreamID: HTTP2StreamID) {
        if phase == .ready { phase = .draining }
        for id in streams.keys where id > lastStreamID {
            end(id, resetting: false, with: nil, handingBack: true)
        }
        if streams.isEmpty { context?.close(promise: nil) }
        origin?.dispatch()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A stream's own error also arrives as StreamClosedEvent; only the connection's errors close it.
        if error is NIOHTTP2Errors.StreamError { return }
        lastError = error
        if phase == .ready { phase = .draining }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let wasConnecting = phase == .connecting
        phase = .closed
        handshakeTimeout?.cancel()
        let error = Self.transportError(lastError)
        for id in Array(streams.keys) {
            end(id, resetting: false, with: .failure(.connectionFailed("the connection closed with the request in flight: \(error)")))
        }
        if wasConnecting { origin?.connectionFailed(self, error) } else { origin?.connectionClosed(self) }
        self.context = nil
        context.fireChannelInactive()
    }

    /// Fails what is in flight with `.shutDown` and closes the connection, telling the origin nothing (it is going away).
    func shutdown() {
        origin = nil
        phase = .closed
        handshakeTimeout?.cancel()
        for stream in streams.values {
            stream.timeout?.cancel()
            stream.transfer.complete(.failure(.shutDown))
        }
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

import NIOCore
import NIOHPACK
import NIOHTTP2
@testable import PushHTTP

extension HTTP2FramingKind {
    /// swift-nio-http2's framing: the oracle the transport's tests run beside the worker's nghttp2 framing.
    public static let nio = HTTP2FramingKind(library: "swift-nio-http2") { pipeline, connection in
        let framing = NIOHTTP2Framing(delegate: connection)
        try pipeline.addHandlers([NIOHTTP2Framing.makeHandler(), framing], position: .before(connection))
        framing.openConnectionWindow()
        return framing
    }

    /// The worker's framing and the oracle, for tests that must pass on both.
    public static let allFramings: [HTTP2FramingKind] = [.nghttp2, .nio]
}

/// HTTP/2 framing on swift-nio-http2: the channel handler above `NIOHTTP2Handler` that writes each
/// request as frames on a stream of its own (no channel per stream) and reports the frames that come back.
///
/// Without NIO's per-stream channels, flow control of what the server sends is ours: the connection
/// window is raised at start and topped up as the handler reports it used (RFC 9113 §6.9).
///
/// The bound on an answer's field section is NIO's: its HPACK decoder counts name + value + 32 per field
/// (RFC 9113 §6.5.2) and stops decoding past `maxHeaderListSize`, which follows the SETTINGS_MAX_HEADER_LIST_SIZE
/// announced here once the server acknowledges it (16 KiB before). A decoder stopped mid-block has lost the HPACK
/// table's state, so NIO ends the whole connection (GOAWAY) rather than the stream: the requests on it fail, and the
/// next ones go over a new connection. nghttp2 framing resets only the stream (`NGHTTP2Framing`).
final class NIOHTTP2Framing: ChannelInboundHandler, RemovableChannelHandler, HTTP2Framing {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private weak var delegate: (any HTTP2FramingDelegate)?
    private var context: ChannelHandlerContext?
    private var nextStreamID: Int32 = 1
    private var fieldIndexing = FieldIndexing()
    /// Streams whose answer the connection still reads, so their windows are kept open.
    private var readingStreams: Set<Int32> = []

    init(delegate: any HTTP2FramingDelegate) { self.delegate = delegate }

    static func makeHandler() -> NIOHTTP2Handler {
        var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
        connectionConfiguration.initialSettings = [
            HTTP2Setting(parameter: .enablePush, value: 0),
            HTTP2Setting(parameter: .maxConcurrentStreams, value: 0),
            HTTP2Setting(parameter: .initialWindowSize, value: HTTP2ClientSettings.streamWindow),
            HTTP2Setting(parameter: .maxHeaderListSize, value: HTTP2ClientSettings.maximumHeaderListSize),
        ]
        // The connection writes only fields `HTTPRequest` validated, and reads only `:status` (checked there) and copies
        // the rest as opaque text; NIO's own check of every field in both directions cost about 5 % of a request's CPU.
        connectionConfiguration.headerBlockValidation = .disabled
        return NIOHTTP2Handler(mode: .client, connectionConfiguration: connectionConfiguration)
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }
    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func openConnectionWindow() {
        context?.write(
            wrapOutboundOut(
                HTTP2Frame(
                    streamID: .rootStream,
                    payload: .windowUpdate(windowSizeIncrement: HTTP2ClientSettings.connectionWindow - 65_535))),
            promise: nil)
        context?.flush()
    }

    // MARK: Requests

    func startStream(_ head: HTTP2RequestHead, body: [UInt8]?) -> HTTP2StreamStart {
        guard let context, nextStreamID < Int32.max - 1 else { return .noStreamLeft }
        let id = nextStreamID
        nextStreamID += 2
        var headers = HPACKHeaders()
        headers.reserveCapacity(head.fields.count + 4)
        headers.add(name: ":method", value: head.method)
        headers.add(name: ":scheme", value: "https")
        headers.add(name: ":authority", value: head.authority)
        // A device token or a subscription makes most paths unique: indexed, each would push a reusable field
        // (the provider token, the topic) out of the HPACK table and cost the next request its full text.
        headers.add(name: ":path", value: head.path, indexing: .nonIndexable)
        for field in head.fields {
            headers.add(name: field.name, value: field.value, indexing: fieldIndexing.indexing(name: field.name, value: field.value))
        }
        let streamID = HTTP2StreamID(id)
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: body == nil)))),
            promise: nil)
        if let body {
            let buffer = context.channel.allocator.buffer(bytes: body)
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(buffer), endStream: true)))),
                promise: nil)
        }
        readingStreams.insert(id)
        return .started(id)
    }

    func resetStream(_ id: Int32) {
        readingStreams.remove(id)
        context?.write(wrapOutboundOut(HTTP2Frame(streamID: HTTP2StreamID(id), payload: .rstStream(.cancel))), promise: nil)
    }

    func sendPing() {
        context?.write(
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(withInteger: 1), ack: false))),
            promise: nil)
    }

    func flush() { context?.flush() }

    // MARK: Frames from the server

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard let delegate else { return }
        delegate.framingReceivedBytes()
        let frame = unwrapInboundIn(data)
        let id = Int32(frame.streamID)
        switch frame.payload {
        case .headers(let headers):
            for (name, value, _) in headers.headers { delegate.received(field: name, value: value, on: id) }
            delegate.receivedEndOfHeaders(on: id, endStream: headers.endStream)
        case .data(let data):
            guard case .byteBuffer(let buffer) = data.data else { return }
            if data.endStream { readingStreams.remove(id) }
            buffer.withUnsafeReadableBytes { delegate.received(body: $0, endStream: data.endStream, on: id) }
        case .rstStream(let code):
            readingStreams.remove(id)
            delegate.receivedReset(on: id, code: UInt32(code.networkCode))
        case .goAway(let lastStreamID, _, _):
            delegate.receivedGoAway(lastStreamID: Int32(lastStreamID))
        case .settings(.settings(let settings)):
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                delegate.receivedMaximumConcurrentStreams(setting.value)
            }
        default:
            break
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent {
            let id = Int32(closed.streamID)
            readingStreams.remove(id)
            delegate?.streamClosed(id, code: closed.reason.map { UInt32($0.networkCode) } ?? HTTP2ClientSettings.noError)
        } else if let window = event as? NIOHTTP2WindowUpdatedEvent {
            inboundWindowChanged(window)
        } else {
            context.fireUserInboundEventTriggered(event)
        }
    }

    /// Keeps the server able to send: once half of a window is used, it is topped up to its full size. The
    /// handler reports the windows as they are, DATA of streams already reset included (those frames never
    /// reach `channelRead`, but they use the connection's window all the same).
    private func inboundWindowChanged(_ event: NIOHTTP2WindowUpdatedEvent) {
        guard let remaining = event.inboundWindowSize, let context else { return }
        let target: Int
        if event.streamID == .rootStream {
            target = HTTP2ClientSettings.connectionWindow
        } else if readingStreams.contains(Int32(event.streamID)) {
            target = HTTP2ClientSettings.streamWindow
        } else {
            return
        }
        guard remaining <= target / 2 else { return }
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: event.streamID, payload: .windowUpdate(windowSizeIncrement: target - remaining))),
            promise: nil)
        context.flush()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A stream's own error also arrives as StreamClosedEvent; only the connection's errors go up to close it.
        if error is NIOHTTP2Errors.StreamError { return }
        context.fireErrorCaught(error)
    }
}

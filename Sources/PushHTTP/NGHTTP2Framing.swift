import CNGHTTP2
import NIOCore

/// HTTP/2 framing by nghttp2, the library under h2load and libcurl's HTTP/2: the channel handler
/// between TLS and the connection. Bytes from the server go into the session, the session's frames
/// are written out on `flush`; nghttp2 keeps the flow-control windows open (it acknowledges DATA as
/// it is read, RFC 9113 §6.9), answers PING and SETTINGS, and checks each answer's fields (§8.3).
final class NGHTTP2Framing: ChannelInboundHandler, RemovableChannelHandler, HTTP2Framing {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private weak var delegate: (any HTTP2FramingDelegate)?
    private var context: ChannelHandlerContext?
    private var session: NGHTTP2Session!
    private var fieldIndexing = FieldIndexing()
    /// Request bodies not yet handed to the session, by stream.
    private var bodies: [Int32: (bytes: [UInt8], sent: Int)] = [:]
    /// The field section being decoded, counted as SETTINGS_MAX_HEADER_LIST_SIZE counts it. One counter serves every
    /// stream: a field block is one HEADERS frame and the CONTINUATION frames right after it (RFC 9113 §4.3).
    private var fieldSection = FieldSectionSize()

    static var libraryVersion: String { nghttp2_version(0).map { String(cString: $0.pointee.version_str) } ?? "" }

    init(delegate: any HTTP2FramingDelegate) throws {
        self.delegate = delegate
        session = try NGHTTP2Session(owner: Unmanaged.passUnretained(self).toOpaque())
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        flush()
    }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    // MARK: Requests

    func startStream(_ head: HTTP2RequestHead, body: [UInt8]?) -> HTTP2StreamStart {
        guard context != nil else { return .noStreamLeft }
        session.add(field: ":method", value: head.method, indexed: true)
        session.add(field: ":scheme", value: "https", indexed: true)
        session.add(field: ":authority", value: head.authority, indexed: true)
        // A device token or a subscription makes most paths unique (nghttp2 never indexes :path either).
        session.add(field: ":path", value: head.path, indexed: false)
        for field in head.fields {
            session.add(
                field: field.name, value: field.value, indexed: fieldIndexing.indexing(name: field.name, value: field.value) == .indexable)
        }
        let id = session.submitRequest(hasBody: body != nil)
        if id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE.rawValue { return .noStreamLeft }
        guard id > 0 else { return .failed(.protocolError("the request was not queued: \(NGHTTP2Session.describe(id))")) }
        if let body { bodies[id] = (body, 0) }
        return .started(id)
    }

    func resetStream(_ id: Int32) {
        bodies[id] = nil
        session.resetStream(id)
    }

    func sendPing() { session.ping() }

    func flush() {
        guard let context else { return }
        var output: ByteBuffer?
        let problem = session.send { bytes in
            if output == nil { output = context.channel.allocator.buffer(capacity: max(bytes.count, 4096)) }
            output!.writeBytes(bytes)
        }
        if let output { context.writeAndFlush(wrapOutboundOut(output), promise: nil) }
        if let problem {
            context.fireErrorCaught(HTTPTransportError.protocolError(problem))
        } else if !session.wantsReadOrWrite {
            // A GOAWAY was sent or received and every stream is done.
            context.close(promise: nil)
        }
    }

    // MARK: Bytes from the server

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        delegate?.framingReceivedBytes()
        let buffer = unwrapInboundIn(data)
        if let problem = buffer.withUnsafeReadableBytes({ session.receive($0) }) {
            // nghttp2 queued a GOAWAY naming the problem: it leaves before the connection closes.
            flush()
            context.fireErrorCaught(HTTPTransportError.protocolError(problem))
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // SETTINGS and PING acknowledgements, WINDOW_UPDATEs: one write per read burst.
        flush()
        context.fireChannelReadComplete()
    }

    // MARK: The session's callbacks (during `receive` and `send`)

    fileprivate func beginFieldSection() { fieldSection = FieldSectionSize() }

    /// Hands a decoded field on, or returns false, before copying it, when it takes the field section past
    /// `HTTP2ClientSettings.maximumHeaderListSize`: the connection then resets the stream (RST_STREAM CANCEL) and
    /// nghttp2 decodes the rest of the block only to keep its HPACK table in step, without handing it out.
    fileprivate func received(field name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, on stream: Int32) -> Bool {
        guard fieldSection.admits(nameLength: name.count, valueLength: value.count) else {
            delegate?.receivedFieldSectionBeyondLimit(on: stream)
            return false
        }
        delegate?.received(field: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self), on: stream)
        return true
    }

    fileprivate func received(frame: UnsafePointer<nghttp2_frame>) {
        guard let delegate else { return }
        let header = frame.pointee.hd
        let endStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(header.type) {
        case NGHTTP2_HEADERS.rawValue:
            delegate.receivedEndOfHeaders(on: header.stream_id, endStream: endStream)
        case NGHTTP2_DATA.rawValue where endStream:
            delegate.receivedEndOfStream(on: header.stream_id)
        case NGHTTP2_RST_STREAM.rawValue:
            delegate.receivedReset(on: header.stream_id, code: frame.pointee.rst_stream.error_code)
        case NGHTTP2_GOAWAY.rawValue:
            delegate.receivedGoAway(lastStreamID: frame.pointee.goaway.last_stream_id)
        case NGHTTP2_SETTINGS.rawValue where header.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0:
            delegate.receivedMaximumConcurrentStreams(Int(session.remoteMaximumConcurrentStreams))
        default:
            break
        }
    }

    fileprivate func received(body: UnsafeRawBufferPointer, on stream: Int32) {
        delegate?.received(body: body, endStream: false, on: stream)
    }

    fileprivate func streamClosed(_ stream: Int32, code: UInt32) {
        bodies[stream] = nil
        delegate?.streamClosed(stream, code: code)
    }

    /// Copies up to `room.count` bytes of the stream's body into `room`: how many, and whether that was the last of it.
    fileprivate func readBody(of stream: Int32, into room: UnsafeMutableRawBufferPointer) -> (count: Int, end: Bool) {
        guard let body = bodies[stream] else { return (0, true) }
        let count = min(room.count, body.bytes.count - body.sent)
        body.bytes.withUnsafeBytes { room.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[body.sent..<(body.sent + count)])) }
        if body.sent + count == body.bytes.count {
            bodies[stream] = nil
            return (count, true)
        }
        bodies[stream]!.sent += count
        return (count, false)
    }

    fileprivate static func framing(_ userData: UnsafeMutableRawPointer?) -> NGHTTP2Framing {
        Unmanaged<NGHTTP2Framing>.fromOpaque(userData!).takeUnretainedValue()
    }
}

/// The fields of the request being put together: their bytes, one after the other, and each one's lengths.
private struct PendingFields {
    private var bytes: [UInt8] = []
    private var lengths: [(name: Int, value: Int, indexed: Bool)] = []
    private var entries: [nghttp2_nv] = []

    mutating func add(_ name: String, _ value: String, indexed: Bool) {
        let start = bytes.count
        bytes.append(contentsOf: name.utf8)
        let nameLength = bytes.count - start
        bytes.append(contentsOf: value.utf8)
        lengths.append((nameLength, bytes.count - start - nameLength, indexed))
    }

    /// Calls `submit` with the fields as nghttp2 entries, which point into `bytes` for the length of the call; then
    /// starts the next request's fields.
    mutating func submit(_ submit: (UnsafePointer<nghttp2_nv>?, Int) -> Int32) -> Int32 {
        defer {
            bytes.removeAll(keepingCapacity: true)
            lengths.removeAll(keepingCapacity: true)
            entries.removeAll(keepingCapacity: true)
        }
        return bytes.withUnsafeMutableBufferPointer { storage in
            guard var name = storage.baseAddress else { return submit(nil, 0) }
            for field in lengths {
                entries.append(
                    nghttp2_nv(
                        name: name, value: name + field.name, namelen: field.name, valuelen: field.value,
                        flags: UInt8(field.indexed ? NGHTTP2_NV_FLAG_NONE.rawValue : NGHTTP2_NV_FLAG_NO_INDEX.rawValue)))
                name += field.name + field.value
            }
            return entries.withUnsafeBufferPointer { submit($0.baseAddress, $0.count) }
        }
    }
}

/// One nghttp2 client session (`nghttp2_session`). Its callbacks reach the framing that owns it, through
/// `owner`: the framing holds the session and makes every call into it, so it outlives each callback.
private final class NGHTTP2Session {
    private let session: OpaquePointer
    /// One stored property for the request's fields, so adding a field is one access to the session's state
    /// (each access to a class's stored property is checked for exclusivity at run time).
    private var pending = PendingFields()

    init(owner: UnsafeMutableRawPointer) throws {
        var callbacks: OpaquePointer?
        guard nghttp2_session_callbacks_new(&callbacks) == 0, let callbacks else {
            throw HTTPTransportError.protocolError("nghttp2: out of memory")
        }
        defer { nghttp2_session_callbacks_del(callbacks) }
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, _, userData in
            NGHTTP2Framing.framing(userData).beginFieldSection()
            return 0
        }
        // nghttp2 hands out every decoded field and leaves bounding them to the application ("Application should properly
        // limit the total buffer size to store incoming header fields", nghttp2.h): one small HPACK block can decode to
        // megabytes. Past the bound, TEMPORAL_CALLBACK_FAILURE stops the callbacks for the rest of the block.
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, userData in
            guard let frame, UInt32(frame.pointee.hd.type) == NGHTTP2_HEADERS.rawValue else { return 0 }
            let kept = NGHTTP2Framing.framing(userData).received(
                field: UnsafeRawBufferPointer(start: name, count: nameLength),
                value: UnsafeRawBufferPointer(start: value, count: valueLength),
                on: frame.pointee.hd.stream_id)
            return kept ? 0 : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, userData in
            if let frame { NGHTTP2Framing.framing(userData).received(frame: frame) }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, stream, data, length, userData in
            NGHTTP2Framing.framing(userData).received(body: UnsafeRawBufferPointer(start: data, count: length), on: stream)
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, stream, code, userData in
            NGHTTP2Framing.framing(userData).streamClosed(stream, code: code)
            return 0
        }
        var option: OpaquePointer?
        guard nghttp2_option_new(&option) == 0, let option else { throw HTTPTransportError.protocolError("nghttp2: out of memory") }
        defer { nghttp2_option_del(option) }
        // The server's answers are ours to bound (HTTPResponse's limits); a PUSH_PROMISE is refused by SETTINGS_ENABLE_PUSH 0.
        nghttp2_option_set_max_reserved_remote_streams(option, 0)
        var made: OpaquePointer?
        guard nghttp2_session_client_new2(&made, callbacks, owner, option) == 0, let made else {
            throw HTTPTransportError.protocolError("nghttp2: out of memory")
        }
        session = made
        let settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue), value: 0),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: UInt32(HTTP2ClientSettings.streamWindow)),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(HTTP2ClientSettings.maximumHeaderListSize)),
        ]
        guard nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), settings, settings.count) == 0,
            nghttp2_session_set_local_window_size(
                session, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, Int32(HTTP2ClientSettings.connectionWindow)) == 0
        else { throw HTTPTransportError.protocolError("nghttp2: the client settings were refused") }
    }

    deinit { nghttp2_session_del(session) }

    /// A field of the next request (`submitRequest`).
    func add(field name: String, value: String, indexed: Bool) {
        pending.add(name, value, indexed: indexed)
    }

    /// Queues a request's HEADERS from the fields added since the last one (the session copies them); a positive
    /// stream id, or a negative nghttp2 error.
    func submitRequest(hasBody: Bool) -> Int32 {
        pending.submit { [session] entries, count in
            guard hasBody else { return nghttp2_submit_request(session, nil, entries, count, nil, nil) }
            var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil)) { _, stream, buffer, length, flags, _, userData in
                let read = NGHTTP2Framing.framing(userData).readBody(
                    of: stream, into: UnsafeMutableRawBufferPointer(start: buffer, count: length))
                if read.end { flags!.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
                return read.count
            }
            return nghttp2_submit_request(session, nil, entries, count, &provider, nil)
        }
    }

    func resetStream(_ id: Int32) {
        _ = nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), id, NGHTTP2_CANCEL.rawValue)
    }

    func ping() { _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil) }

    /// Feeds bytes from the server to the session; what went wrong if the connection must end.
    func receive(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let start = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return nil }
        let used = nghttp2_session_mem_recv(session, start, bytes.count)
        return used < 0 ? Self.describe(Int32(truncatingIfNeeded: used)) : nil
    }

    /// Hands every frame the session has to send to `write`, in order; what went wrong if the connection must end.
    func send(_ write: (UnsafeRawBufferPointer) -> Void) -> String? {
        while true {
            var data: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &data)
            if length < 0 { return Self.describe(Int32(truncatingIfNeeded: length)) }
            guard length > 0, let data else { return nil }
            write(UnsafeRawBufferPointer(start: data, count: length))
        }
    }

    var wantsReadOrWrite: Bool { nghttp2_session_want_read(session) != 0 || nghttp2_session_want_write(session) != 0 }

    var remoteMaximumConcurrentStreams: UInt32 {
        nghttp2_session_get_remote_settings(session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS)
    }

    static func describe(_ code: Int32) -> String { "nghttp2: " + String(cString: nghttp2_strerror(code)) }
}

import NIOCore
import NIOHPACK

/// The HTTP/2 framing under one client connection: it turns requests into frames and the server's
/// frames into the events below. The connection above it keeps the streams, timeouts and answers, the
/// same whichever framing carries them.
protocol HTTP2Framing: AnyObject {
    /// Writes a request's HEADERS and, with a body, its DATA.
    func startStream(_ head: HTTP2RequestHead, body: [UInt8]?) -> HTTP2StreamStart
    /// RST_STREAM(CANCEL) for a stream the connection gave up.
    func resetStream(_ id: Int32)
    func sendPing()
    /// Sends what was written since the last flush.
    func flush()
}

/// What a framing reports to the connection, in the order the frames arrived.
protocol HTTP2FramingDelegate: AnyObject {
    /// Bytes arrived: the connection is alive.
    func framingReceivedBytes()
    func received(field name: String, value: String, on stream: Int32)
    /// The answer's field section grew past `HTTP2ClientSettings.maximumHeaderListSize` while being decoded: its
    /// fields from there on are not handed out, and the stream is to be reset.
    func receivedFieldSectionBeyondLimit(on stream: Int32)
    func receivedEndOfHeaders(on stream: Int32, endStream: Bool)
    func received(body: UnsafeRawBufferPointer, endStream: Bool, on stream: Int32)
    func receivedEndOfStream(on stream: Int32)
    func receivedReset(on stream: Int32, code: UInt32)
    func receivedGoAway(lastStreamID: Int32)
    func receivedMaximumConcurrentStreams(_ value: Int)
    /// The stream closed at the framing layer (`code` 0: NO_ERROR); an answer it completed was reported before.
    func streamClosed(_ stream: Int32, code: UInt32)
}

/// The size of a field section as SETTINGS_MAX_HEADER_LIST_SIZE counts it: each field's name and value
/// in octets, uncompressed, plus 32 (RFC 9113 §6.5.2; the 32 is RFC 7541 §4.1's entry overhead).
struct FieldSectionSize {
    static let overheadPerField = 32
    private(set) var octets = 0

    /// Counts one more field; false once the section is past `HTTP2ClientSettings.maximumHeaderListSize`.
    /// The lengths come from the peer: clamped so the sum cannot overflow.
    mutating func admits(nameLength: Int, valueLength: Int) -> Bool {
        let limit = HTTP2ClientSettings.maximumHeaderListSize
        octets = min(octets, limit + 1) + min(nameLength, limit + 1) + min(valueLength, limit + 1) + Self.overheadPerField
        return octets <= limit
    }
}

enum HTTP2StreamStart {
    case started(Int32)
    /// The connection cannot open another stream (no stream id left, RFC 9113 §5.1.1, or it closed): the request
    /// goes to another one, unsent.
    case noStreamLeft
    case failed(HTTPTransportError)
}

/// A request's pseudo-header values and its fields, lower-cased and without connection-specific ones.
struct HTTP2RequestHead {
    var method: String
    var authority: String
    var path: String
    var fields: [(name: String, value: String)]
}

/// The HTTP/2 settings this client announces and the windows it keeps open (RFC 9113 §6.5.2, §6.9).
enum HTTP2ClientSettings {
    static let connectionWindow = 4 << 20
    static let streamWindow = 1 << 20
    /// SETTINGS_MAX_HEADER_LIST_SIZE, and the bound both framings hold an answer's field section to while decoding it.
    static let maximumHeaderListSize = 64 << 10
    /// RFC 9113 §7 error codes the connection acts on.
    static let noError: UInt32 = 0x0
    static let refusedStream: UInt32 = 0x7
}

/// Which library frames HTTP/2 on the transport's connections; TLS and the event loop are swift-nio's either way.
/// The worker has one, `nghttp2`. Tests add a second implementation as an oracle (swift-nio-http2's, in TestSupport)
/// through the internal initializer, and run the transport's tests on both: a frame-level difference shows as a test
/// that passes on one framing only.
public struct HTTP2FramingKind: Sendable, Equatable, CustomStringConvertible {
    /// The library, with its version where it has one: for reports.
    public let library: String
    private let installer:
        @Sendable (ChannelPipeline.SynchronousOperations, any ChannelHandler & HTTP2FramingDelegate) throws -> any HTTP2Framing

    /// - Parameter install: puts the framing between TLS and the connection (the handler it is given) once the handshake
    ///   chose h2, and sends the client preface.
    init(
        library: String,
        install:
            @escaping @Sendable (ChannelPipeline.SynchronousOperations, any ChannelHandler & HTTP2FramingDelegate) throws ->
            any HTTP2Framing
    ) {
        self.library = library
        installer = install
    }

    /// nghttp2, the library under h2load and libcurl's HTTP/2, with half the CPU per request of swift-nio-http2's
    /// framing (docs/performance.md).
    public static let nghttp2 = HTTP2FramingKind(library: "nghttp2 " + NGHTTP2Framing.libraryVersion) { pipeline, connection in
        let framing = try NGHTTP2Framing(delegate: connection)
        try pipeline.addHandler(framing, position: .before(connection))
        return framing
    }

    public var description: String { library }

    /// Framings are told apart by their library.
    public static func == (lhs: HTTP2FramingKind, rhs: HTTP2FramingKind) -> Bool { lhs.library == rhs.library }

    /// Puts the framing between TLS and `connection` once the handshake chose h2, and sends the client preface.
    func install(in pipeline: ChannelPipeline.SynchronousOperations, below connection: some ChannelHandler & HTTP2FramingDelegate)
        throws -> any HTTP2Framing
    {
        try installer(pipeline, connection)
    }

    /// A name of an RFC 9113 §7 error code for messages.
    static func describe(errorCode code: UInt32) -> String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
            "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
            "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return code < names.count ? names[Int(code)] : "error code 0x\(String(code, radix: 16))"
    }
}

import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// An OTLP/HTTP receiver for the tests: takes `POST /v1/traces` (http/protobuf), keeps each span it finds and
/// answers 200 with an empty `ExportTraceServiceResponse`.
final class OTLPReceiver: Sendable {
    /// The fields of an OTLP span the tests look at (opentelemetry-proto `trace/v1/trace.proto`).
    struct ReceivedSpan: Sendable, Equatable {
        enum Kind: UInt64, Sendable {
            case unspecified = 0
            case `internal`, server, client, producer, consumer
        }

        var traceID: [UInt8] = []
        var spanID: [UInt8] = []
        var parentSpanID: [UInt8] = []
        var name = ""
        var kind = Kind.unspecified
        /// String and integer attributes, as text.
        var attributes: [String: String] = [:]
    }

    private let channel: any Channel
    private let box: SpansBox

    var port: Int { channel.localAddress?.port ?? 0 }
    var endpoint: String { "http://127.0.0.1:\(port)/v1/traces" }
    var spans: [ReceivedSpan] { box.spans.withLock { $0 } }

    private init(channel: any Channel, box: SpansBox) {
        self.channel = channel
        self.box = box
    }

    static func start() async throws -> OTLPReceiver {
        let box = SpansBox()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap { channel.pipeline.addHandler(Handler(box: box)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return OTLPReceiver(channel: channel, box: box)
    }

    func stop() async { try? await channel.close() }

    private final class SpansBox: Sendable {
        let spans = Mutex<[ReceivedSpan]>([])
    }

    private final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let box: SpansBox
        var body: [UInt8] = []

        init(box: SpansBox) { self.box = box }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head: body = []
            case .body(var buffer): body += buffer.readBytes(length: buffer.readableBytes) ?? []
            case .end:
                let received = OTLPReceiver.spans(inExportRequest: body)
                box.spans.withLock { $0 += received }
                var head = HTTPResponseHead(version: .http1_1, status: .ok)
                head.headers.add(name: "content-type", value: "application/x-protobuf")
                head.headers.add(name: "content-length", value: "0")
                context.write(wrapOutboundOut(.head(head)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }

    /// Protocol Buffers wire format, just enough to walk ExportTraceServiceRequest → ResourceSpans (1) →
    /// ScopeSpans (2) → Span (2).
    static func spans(inExportRequest bytes: [UInt8]) -> [ReceivedSpan] {
        var spans: [ReceivedSpan] = []
        for (field, resourceSpans) in fields(bytes) where field == 1 {
            for (field, scopeSpans) in fields(resourceSpans.bytes) where field == 2 {
                for (field, span) in fields(scopeSpans.bytes) where field == 2 { spans.append(decodeSpan(span.bytes)) }
            }
        }
        return spans
    }

    private static func decodeSpan(_ bytes: [UInt8]) -> ReceivedSpan {
        var span = ReceivedSpan()
        for (field, value) in fields(bytes) {
            switch field {
            case 1: span.traceID = value.bytes
            case 2: span.spanID = value.bytes
            case 4: span.parentSpanID = value.bytes
            case 5: span.name = String(decoding: value.bytes, as: UTF8.self)
            case 6: span.kind = ReceivedSpan.Kind(rawValue: value.number) ?? .unspecified
            case 9:
                // KeyValue { string key = 1; AnyValue value = 2 }, AnyValue { string_value = 1; int_value = 3 }
                var key = ""
                var text = ""
                for (field, part) in fields(value.bytes) {
                    if field == 1 { key = String(decoding: part.bytes, as: UTF8.self) }
                    if field == 2 {
                        for (kind, any) in fields(part.bytes) {
                            if kind == 1 { text = String(decoding: any.bytes, as: UTF8.self) }
                            if kind == 3 { text = String(Int64(bitPattern: any.number)) }
                        }
                    }
                }
                span.attributes[key] = text
            default: break
            }
        }
        return span
    }

    private struct FieldValue {
        var number: UInt64 = 0
        var bytes: [UInt8] = []
    }

    private static func fields(_ bytes: [UInt8]) -> [(UInt64, FieldValue)] {
        var fields: [(UInt64, FieldValue)] = []
        var index = 0
        func varint() -> UInt64? {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while index < bytes.count, shift < 64 {
                let byte = bytes[index]
                index += 1
                value |= UInt64(byte & 0x7F) << shift
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
            return nil
        }
        while index < bytes.count, let tag = varint() {
            var value = FieldValue()
            switch tag & 7 {
            case 0:
                guard let number = varint() else { return fields }
                value.number = number
            case 1:
                guard index + 8 <= bytes.count else { return fields }
                index += 8
            case 2:
                guard let length = varint(), length <= UInt64(bytes.count - index) else { return fields }
                value.bytes = Array(bytes[index..<index + Int(length)])
                index += Int(length)
            case 5:
                guard index + 4 <= bytes.count else { return fields }
                index += 4
            default: return fields
            }
            fields.append((tag >> 3, value))
        }
        return fields
    }
}

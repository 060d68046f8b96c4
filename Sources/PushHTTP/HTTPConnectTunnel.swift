import NIOCore

/// Opens an HTTP CONNECT tunnel (RFC 9110 §9.3.6) through the egress proxy once the TCP connection to the proxy is up:
/// sends `CONNECT host:port HTTP/1.1` with `Host` and, when the proxy URL has credentials, `Proxy-Authorization: Basic`,
/// then reads the proxy's answer head. Any 2xx answer establishes the tunnel: the handler removes itself and
/// `established` runs (the connection puts TLS for the target in its place). Anything else fails the connection with
/// `EgressProxyFailure`. The caller's connect timeout bounds the wait for the answer.
final class HTTPConnectTunnel: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// An answer head longer than this is not a proxy's (squid's are a few hundred bytes).
    static let maximumHeadBytes = 16 << 10

    private let proxy: EgressProxy
    /// `host:port` of the CONNECT line: a name, or the checked IP literal of a pinned request (IPv6 in brackets).
    let target: String
    private let established: (ChannelHandlerContext) -> Void
    private let failed: (EgressProxyFailure) -> Void
    private var head: [UInt8] = []
    private var done = false

    init(
        proxy: EgressProxy, target: String, established: @escaping (ChannelHandlerContext) -> Void,
        failed: @escaping (EgressProxyFailure) -> Void
    ) {
        self.proxy = proxy
        self.target = target
        self.established = established
        self.failed = failed
    }

    /// The request the proxy receives.
    static func request(target: String, proxy: EgressProxy) -> String {
        var text = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let authorization = proxy.proxyAuthorization { text += "Proxy-Authorization: \(authorization)\r\n" }
        return text + "\r\n"
    }

    func channelActive(context: ChannelHandlerContext) {
        let text = Self.request(target: target, proxy: proxy)
        var buffer = context.channel.allocator.buffer(capacity: text.utf8.count)
        buffer.writeString(text)
        context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !done else { return }
        var buffer = unwrapInboundIn(data)
        head += buffer.readBytes(length: buffer.readableBytes) ?? []
        guard let end = Self.endOfHead(head) else {
            if head.count > Self.maximumHeadBytes { fail(.refused(detail: "an answer head beyond 16 KiB"), context: context) }
            return
        }
        guard let status = Self.status(of: head) else {
            fail(.refused(detail: "an answer that is not HTTP/1.x"), context: context)
            return
        }
        guard (200...299).contains(status.code) else {
            fail(status.code == 407 ? .authenticationRequired(status: status.text) : .refused(detail: status.text), context: context)
            return
        }
        // The server speaks only after our TLS ClientHello: bytes already here are not the target's.
        guard end == head.count else {
            fail(.refused(detail: "bytes after its \(status.code) answer, before the tunnel was used"), context: context)
            return
        }
        done = true
        established(context)
        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done { fail(.refused(detail: "it closed the connection without answering"), context: nil) }
        context.fireChannelInactive()
    }

    private func fail(_ failure: EgressProxyFailure, context: ChannelHandlerContext?) {
        guard !done else { return }
        done = true
        failed(failure)
        context?.close(promise: nil)
    }

    /// The index after the blank line that ends the head, nil while it has not arrived.
    static func endOfHead(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 3..<bytes.count
        where bytes[index] == 0x0A && bytes[index - 1] == 0x0D && bytes[index - 2] == 0x0A && bytes[index - 3] == 0x0D {
            return index + 1
        }
        return nil
    }

    /// The status code and `code reason` of the answer's status line (RFC 9112 §4), the reason cut to printable ASCII.
    static func status(of head: [UInt8]) -> (code: Int, text: String)? {
        let line = head.prefix { $0 != 0x0D && $0 != 0x0A }
        let parts = line.split(separator: UInt8(ascii: " "), maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].starts(with: Array("HTTP/1.".utf8)), parts[1].count == 3,
            let code = Int(String(decoding: parts[1], as: UTF8.self)), (100...599).contains(code)
        else { return nil }
        let reason = parts.count > 2 ? String(decoding: parts[2].prefix(64).filter { $0 >= 0x20 && $0 < 0x7F }, as: UTF8.self) : ""
        return (code, reason.isEmpty ? "\(code)" : "\(code) \(reason)")
    }
}

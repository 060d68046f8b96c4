/// The fuzzers build PushHTTP without a TLS stack (no swift-nio-ssl): a TLS options' check here says only whether a
/// file was refused when read. The worker's own check (`TLSOptions+NIOSSL.swift`) also parses the bytes.
extension TLSOptions {
    public var problem: String? { refusedFile.map { "\($0)" } }
}

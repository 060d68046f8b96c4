import Foundation
import Metrics
import NIOCore
import NIOPosix
import NIOSSL
import PushCore
import Synchronization

/// The TLS client contexts of a transport's connections, built once per TLS options and credential content and shared by
/// every connection that uses them, on a thread of their own: reading the files and parsing certificates and keys would
/// otherwise run on the event loop that carries every request, once per new connection.
///
/// Each build reads the files again and looks up their bytes: a certificate, key or CA bundle replaced at the same path
/// (a Kubernetes secret volume swaps its `..data` link) makes a new context for new connections, while the connections
/// already open keep the one they were made with. At most `capacity` contexts are kept, the least recently used dropped
/// beyond it and any unused for `idleLimit`; `push_http_tls_contexts` reports how many.
final class TLSContextCache: Sendable {
    /// The options and the bytes of the files they name, as read for this build.
    private struct Key: Hashable, Sendable {
        let options: TLSOptions
        let files: [[UInt8]]
    }

    static let capacity = 1_024
    static let idleLimit = Duration.seconds(3600)

    private let contexts = Mutex(BoundedCache<Key, NIOSSLContext>(capacity: capacity, idleLimit: idleLimit))
    private let threadPool: NIOThreadPool
    private let builds = Atomic<Int>(0)
    /// Labelled by the transport's name, as `push_http2_connection_pools`.
    private let gauge: Gauge

    init(name: String) {
        threadPool = NIOThreadPool(numberOfThreads: 1)
        threadPool.start()
        gauge = Gauge(label: "push_http_tls_contexts", dimensions: [("client", name)])
        gauge.record(0)
    }

    /// Contexts built so far (for tests: connections of one identity share one).
    var buildCount: Int { builds.load(ordering: .relaxed) }

    /// The context for `options`, made on the cache's thread; the future completes on `eventLoop`.
    func context(for options: TLSOptions, on eventLoop: any EventLoop) -> EventLoopFuture<NIOSSLContext> {
        threadPool.runIfActive(eventLoop: eventLoop) { [self] in try context(for: options) }
    }

    private func context(for options: TLSOptions) throws -> NIOSSLContext {
        let key = Key(options: options, files: try Self.read(options))
        let now = currentTimeMilliseconds()
        if let cached = contexts.withLock({ $0.value(for: key, now: now) }) { return cached }
        let context = try NIOSSLContext(configuration: Self.configuration(options, files: key.files))
        builds.add(1, ordering: .relaxed)
        let count = contexts.withLock { contexts in
            contexts.set(context, for: key, now: now)
            return contexts.count
        }
        gauge.record(count)
        return context
    }

    func shutdown() {
        try? threadPool.syncShutdownGracefully()
    }

    /// For a caller on an event loop, which must not wait for the thread to end.
    func shutdownLater() {
        threadPool.shutdownGracefully { _ in }
    }

    /// The files `options` names, in a fixed order: CA bundle, client certificate, client key.
    private static func read(_ options: TLSOptions) throws -> [[UInt8]] {
        var paths = [options.caFile, options.clientCertificateFile]
        if options.clientCertificateFormat == .pem, options.clientCertificateFile != nil {
            paths.append(options.clientKeyFile ?? options.clientCertificateFile)
        }
        return try paths.map { path in
            guard let path else { return [] }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw HTTPTransportError.tls("cannot read \(path)")
            }
            return Array(data)
        }
    }

    /// A client configuration from the bytes `read` returned: verification of the server always on, `h2` offered first.
    private static func configuration(_ options: TLSOptions, files: [[UInt8]]) throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2", "http/1.1"]
        tls.certificateVerification = .fullVerification
        if options.caFile != nil { tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(files[0])) }
        guard options.clientCertificateFile != nil else { return tls }
        let password = options.clientKeyPassword.map { Array($0.utf8) }
        switch options.clientCertificateFormat {
        case .pkcs12:
            let bundle = try NIOSSLPKCS12Bundle(buffer: files[1], passphrase: password)
            tls.certificateChain = bundle.certificateChain.map { .certificate($0) }
            tls.privateKey = .privateKey(bundle.privateKey)
        case .pem:
            tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(files[1]).map { .certificate($0) }
            if let password {
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: files[2], format: .pem) { $0(password) })
            } else {
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: files[2], format: .pem))
            }
        }
        return tls
    }
}

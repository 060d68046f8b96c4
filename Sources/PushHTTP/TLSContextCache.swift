import Metrics
import NIOCore
import NIOPosix
import NIOSSL
import PushCore
import Synchronization

/// The TLS client contexts of a transport's connections, built once per TLS options and shared by every connection that
/// uses them, on a thread of their own: parsing certificates and keys would otherwise run on the event loop that carries
/// every request, once per new connection.
///
/// A context is made of the bytes the options carry (`CredentialFile`, read with the configuration version that named
/// them), never by opening a path: a certificate, key or CA bundle replaced on disk reaches new connections only through a
/// new configuration version that read and checked it, and options with other bytes get a context of their own while the
/// connections already open keep the one they were made with. At most `capacity` contexts are kept, the least recently
/// used dropped beyond it and any unused for `idleLimit`; `push_http_tls_contexts` reports how many.
final class TLSContextCache: Sendable {
    static let capacity = 1_024
    static let idleLimit = Duration.seconds(3600)

    private let contexts = Mutex(BoundedCache<TLSOptions, NIOSSLContext>(capacity: capacity, idleLimit: idleLimit))
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
        let now = currentTimeMilliseconds()
        if let cached = contexts.withLock({ $0.value(for: options, now: now) }) { return cached }
        let context = try NIOSSLContext(configuration: options.clientConfiguration())
        builds.add(1, ordering: .relaxed)
        let count = contexts.withLock { contexts in
            contexts.set(context, for: options, now: now)
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
}

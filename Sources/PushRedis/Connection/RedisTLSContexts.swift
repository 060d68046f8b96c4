import Logging
import NIOSSL
import PushHTTP
import Synchronization

/// The TLS context of new connections: made of the files as read when a connection opens, and made again only when
/// their bytes changed. A file that no longer reads or parses (rotated half way) leaves the last good context in use
/// and is logged once per change; with no good context yet, the connection fails naming the file.
final class RedisTLSContexts: Sendable {
    private let settings: RedisTLSSettings
    private let logger: Logger
    private let current = Mutex<(options: TLSOptions, context: NIOSSLContext)?>(nil)
    private let lastProblem = Mutex<String?>(nil)

    init(settings: RedisTLSSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    func context() throws(RedisError) -> NIOSSLContext {
        let options = TLSOptions(
            caFile: settings.caFile, clientCertificateFile: settings.certificateFile, clientKeyFile: settings.keyFile)
        let last = current.withLock { $0 }
        if let last, last.options == options { return last.context }
        do {
            if let refused = options.refusedFile { throw refused }
            let context = try NIOSSLContext(configuration: try options.clientConfiguration(applicationProtocols: []))
            current.withLock { $0 = (options, context) }
            lastProblem.withLock { $0 = nil }
            return context
        } catch {
            let problem = "Redis TLS files (PUSH_REDIS_CA_FILE, PUSH_REDIS_CERT_FILE, PUSH_REDIS_KEY_FILE) cannot be used: \(error)"
            guard let last else { throw .unavailable(problem) }
            if lastProblem.withLock({ previous in
                defer { previous = problem }
                return previous != problem
            }) {
                logger.error("\(problem); new Redis connections keep the files as last read")
            }
            return last.context
        }
    }
}

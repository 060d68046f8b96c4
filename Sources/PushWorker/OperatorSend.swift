import Foundation
import Logging
import PushCore
import PushHTTP
import Synchronization

/// `push-worker send` (Mizu's `sendpush`): one push with the worker's own configuration and
/// plugin to one binding, to check credentials and tokens. The target goes through the job
/// decoder like any job's, so binding strings and provider rules apply unchanged.
public enum OperatorSend {
    public struct Options: Sendable {
        /// The target as the job contract writes it (native fields or `rfc8599`/`xmpush`).
        public var target: [(name: String, value: String)]
        /// Object members of the target (Web Push `keys`), each as name/value strings.
        public var objects: [(name: String, members: [(name: String, value: String)])]
        public var kind: JobKind
        public var title: String?
        public var body: String?
        public var data: [String: String]
        public var ttlSeconds: Int64

        public init(
            target: [(name: String, value: String)], objects: [(name: String, members: [(name: String, value: String)])] = [],
            kind: JobKind = .message,
            title: String? = nil, body: String? = nil, data: [String: String] = [:], ttlSeconds: Int64 = 60
        ) {
            self.target = target
            self.objects = objects
            self.kind = kind
            self.title = title
            self.body = body
            self.data = data
            self.ttlSeconds = ttlSeconds
        }
    }

    public struct Report: Sendable {
        /// Every HTTP exchange the plugin made (the access-token grant included), in order.
        public var exchanges: [RecordingTransport.Exchange]
        public var outcome: Outcome
        public var delivered: Bool { outcome.status == .delivered }

        /// What the command prints: the provider's answer, then the classified outcome.
        public var lines: [String] {
            var lines: [String] = []
            for (index, exchange) in exchanges.enumerated() {
                let last = index == exchanges.count - 1
                lines.append("request:  \(exchange.method) \(Self.masked(exchange.url))")
                switch exchange.answer {
                case .success(let response):
                    lines.append("answer:   HTTP \(response.status)")
                    // Only the push's own body: a token grant's answer holds a bearer token.
                    if last {
                        lines.append("body:     \(response.body.isEmpty ? "(empty)" : String(decoding: response.body, as: UTF8.self))")
                    }
                case .failure(let error):
                    lines.append("answer:   no response: \(error)")
                }
            }
            if exchanges.isEmpty { lines.append("request:  none was sent") }
            lines.append("result:   \(outcome.status.rawValue)\(outcome.reason.map { " — \($0)" } ?? "")")
            lines.append("outcome:  \(String(decoding: outcome.encoded(), as: UTF8.self))")
            return lines
        }

        /// Device tokens in APNs paths and Web Push endpoint paths are shortened; API URLs are shown whole.
        static func masked(_ url: String) -> String {
            if let range = url.range(of: "/3/device/") { return url[..<range.upperBound] + Redaction.token(url[range.upperBound...]) }
            if url.contains("/v1/projects/") || url.hasSuffix("/token") { return url }
            return Redaction.url(url)
        }
    }

    public struct Refused: Error, CustomStringConvertible {
        public let problems: [String]
        public var description: String { problems.joined(separator: "\n") }
    }

    /// Loads the configuration from `environment` (Kafka settings not needed), sends, reports.
    public static func run(environment: [String: String], options: Options, logger: Logger) async throws(Refused) -> Report {
        let configuration: WorkerConfiguration
        switch WorkerConfiguration.load(from: environment, requireBrokers: false) {
        case .success(let loaded): configuration = loaded
        case .failure(let errors): throw Refused(problems: errors.problems.map { "configuration: \($0)" })
        }
        let now = currentTimeMilliseconds()
        let job: Job
        do {
            job = try JobDecoder(formats: TargetFormats(configuration.targetFormats)).decode(
                jobJSON(options, now: now), fallbackCreatedAt: now)
        } catch {
            throw Refused(problems: ["target: \(error.message)"])
        }
        let target = job.targets[0]
        if target.isUnbound { return Report(exchanges: [], outcome: Outcome(unboundJob: job, target: target, at: now)) }

        let recorders = Mutex<[RecordingTransport]>([])
        let registry: ProviderRegistry
        do {
            let transports = Worker.transports(configuration) { transport in
                let recorder = RecordingTransport(transport)
                recorders.withLock { $0.append(recorder) }
                return recorder
            }
            registry = try Worker.makeRegistry(
                configuration, context: Worker.context(configuration, transports: transports, logger: logger))
        } catch {
            throw Refused(problems: ["\(target.provider.rawValue): \(error)"])
        }
        guard let provider = registry.provider(for: target.provider) else {
            await registry.shutdown()
            throw Refused(problems: ["\(target.provider.rawValue) is not configured: set its PUSH_* variables (push-worker run --help)"])
        }
        let result = await provider.deliver(Delivery(job: job, target: target, attempt: 1, now: now))
        await registry.shutdown()
        let exchanges = recorders.withLock { $0 }.flatMap(\.exchanges)
        return Report(
            exchanges: exchanges, outcome: Outcome(job: job, target: target, result: result, attempts: 1, at: currentTimeMilliseconds()))
    }

    /// A one-target job in the contract's JSON.
    static func jobJSON(_ options: Options, now: Int64) -> [UInt8] {
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.member("v", Int64(1))
        writer.member("id", "send-\(now)")
        writer.member("createdAt", now)
        writer.member("ttl", options.ttlSeconds)
        writer.member("kind", options.kind.rawValue)
        writer.member("userId", "push-worker-send")
        if options.title != nil || options.body != nil {
            writer.key("notification")
            writer.beginObject()
            if let title = options.title { writer.member("title", title) }
            if let body = options.body { writer.member("body", body) }
            writer.endObject()
        }
        if !options.data.isEmpty {
            writer.key("data")
            writer.beginObject()
            for (key, value) in options.data.sorted(by: { $0.key < $1.key }) { writer.member(key, value) }
            writer.endObject()
        }
        writer.key("targets")
        writer.beginArray()
        writer.beginObject()
        writer.member("bindingId", "send")
        for field in options.target { writer.member(field.name, field.value) }
        for object in options.objects {
            writer.key(object.name)
            writer.beginObject()
            for member in object.members { writer.member(member.name, member.value) }
            writer.endObject()
        }
        writer.endObject()
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }
}

/// Passes requests to a transport and keeps each request's answer, for `send`.
public final class RecordingTransport: HTTPTransport {
    public struct Exchange: Sendable {
        public var method: String
        public var url: String
        public var answer: Result<HTTPResponse, HTTPTransportError>
    }

    private let inner: any HTTPTransport
    private let recorded = Mutex<[Exchange]>([])

    public init(_ inner: any HTTPTransport) { self.inner = inner }

    public var exchanges: [Exchange] { recorded.withLock { $0 } }

    public func send(_ request: HTTPRequest) async throws(HTTPTransportError) -> HTTPResponse {
        do {
            let response = try await inner.send(request)
            recorded.withLock { $0.append(Exchange(method: request.method, url: request.url, answer: .success(response))) }
            return response
        } catch {
            recorded.withLock { $0.append(Exchange(method: request.method, url: request.url, answer: .failure(error))) }
            throw error
        }
    }

    public func closeConnections(except live: Set<ConnectionIdentity>) { inner.closeConnections(except: live) }
    public func shutdown() { inner.shutdown() }
}

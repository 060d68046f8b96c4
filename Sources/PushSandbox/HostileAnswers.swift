import PushCore
import Synchronization

/// Hostile push-service behaviour, chosen per target by a marker the caller puts into the
/// target itself, for the `hostile-endpoints` fault scenario. Wraps a sandbox's responder:
/// a request the sandbox would accept gets the marked behaviour instead (requests it rejects
/// keep their answer), and every answer is recorded.
///
/// Markers: `hostile/<behaviour>` as a path segment pair (a Web Push endpoint path
/// `/push/<subscription>/hostile/reset/17`, a push-proxy endpointId `b-17/hostile/reset`),
/// or, in hex APNs device tokens, the prefix `dead` + the behaviour's two-digit code.
public final class HostileAnswers: Sendable {
    public enum Behaviour: String, CaseIterable, Sendable {
        /// 429 with `Retry-After: 99999999999999999` on every attempt. RFC 9110 §10.2.3 gives
        /// delay-seconds no upper bound, so a client must bound it (the job's TTL, a day) itself.
        case retryAfterHuge429 = "retry-after-huge-429"
        /// 503 with the same Retry-After (RFC 9110 §15.6.4 lets 503 carry it too).
        case retryAfterHuge503 = "retry-after-huge-503"
        /// Success with a 64 MiB body: the status alone means delivered (RFC 8030 §5 for Web Push,
        /// Apple's and the proxy protocol's 200), so a client reads at most what it needs.
        case hugeSuccessBody = "huge-200"
        /// 400 with a multi-MiB body that is not the provider's error JSON.
        case hugeErrorBody = "huge-400"
        /// 403 on the first request, then the normal answer: a push service refusing one
        /// subscription (RFC 8292 §4.2, a subscription restricted to another application server
        /// key) says nothing about the others of the same origin.
        case forbiddenOnce = "forbidden-once"
        /// The answer comes only after `stallMilliseconds` (longer than the client's request timeout),
        /// at most `maximumPerTarget` times per target, as `SandboxFaults` bounds its faults.
        case stall
        /// The TCP connection is closed instead of answering (every stream on it fails), at most
        /// `maximumPerTarget` times per target.
        case reset

        /// The two hex digits after `dead` in a marked APNs device token.
        public var apnsCode: String {
            switch self {
            case .retryAfterHuge429: "01"
            case .retryAfterHuge503: "02"
            case .hugeSuccessBody: "03"
            case .hugeErrorBody: "04"
            case .forbiddenOnce: "05"
            case .stall: "06"
            case .reset: "07"
            }
        }
    }

    public struct Settings: Sendable {
        public var stallMilliseconds = 12_000
        public var maximumPerTarget = 2
        public var hugeSuccessBytes = 64 << 20
        public var hugeErrorBytes = 4 << 20
        /// Beyond Int64 milliseconds (and seconds·10⁹ nanoseconds): a client multiplying it overflows.
        public var hugeRetryAfter = "99999999999999999"

        public init() {}
    }

    public static let apnsTokenPrefix = "dead"

    /// The behaviour a Web Push path or proxy endpointId is marked with.
    public static func behaviour(markedIn text: String) -> Behaviour? {
        let segments = text.split(separator: "/", omittingEmptySubsequences: false)
        guard let index = segments.firstIndex(of: "hostile"), index + 1 < segments.count else { return nil }
        return Behaviour(rawValue: String(segments[index + 1]))
    }

    /// The behaviour an APNs device token is marked with.
    public static func behaviour(apnsToken token: String) -> Behaviour? {
        guard token.hasPrefix(apnsTokenPrefix) else { return nil }
        let code = token.dropFirst(apnsTokenPrefix.count).prefix(2)
        return Behaviour.allCases.first { $0.apnsCode == code }
    }

    private let settings: Settings
    private let record: AnswerRecord?
    private let faultsPerTarget = Mutex<[String: Int]>([:])

    public init(_ settings: Settings = Settings(), record: AnswerRecord?) {
        self.settings = settings
        self.record = record
    }

    /// Wraps `responder`. `key` names the target of a request (recorded; nil = not recorded,
    /// never hostile), `marker` finds the behaviour in that key, `signer` the credential that signed it (recorded).
    public func wrap(
        _ responder: @escaping SandboxServer.Responder, key: @escaping @Sendable (SandboxRequest) -> String?,
        signer: @escaping @Sendable (SandboxRequest) -> String? = { _ in nil },
        marker: @escaping @Sendable (String) -> Behaviour?
    ) -> SandboxServer.Responder {
        { [self] request in
            let normal = responder(request)
            guard let target = key(request) else { return normal }
            var response = normal
            var label = String(normal.status)
            if (200..<300).contains(normal.status), let behaviour = marker(target) {
                (response, label) = answer(behaviour, target: target, normal: normal)
                // What the answer does to its connection stays (APNs raising its stream limit), unless it resets it.
                if case nil = response.connectionAction { response.connectionAction = normal.connectionAction }
            }
            record?.write(key: target, label: label, connection: request.connection, signer: signer(request))
            return response
        }
    }

    private func answer(_ behaviour: Behaviour, target: String, normal: SandboxResponse) -> (SandboxResponse, String) {
        switch behaviour {
        case .retryAfterHuge429, .retryAfterHuge503:
            let status = behaviour == .retryAfterHuge429 ? 429 : 503
            return (SandboxResponse(status: status, headers: [("retry-after", settings.hugeRetryAfter)]), String(status))
        case .hugeSuccessBody:
            var response = normal
            response.generatedBodyBytes = settings.hugeSuccessBytes
            return (response, String(normal.status))
        case .hugeErrorBody:
            var response = SandboxResponse(status: 400)
            response.generatedBodyBytes = settings.hugeErrorBytes
            return (response, "400")
        case .forbiddenOnce:
            guard takeFault(target, limit: 1) else { return (normal, String(normal.status)) }
            return (SandboxResponse(status: 403, body: Array("subscription refused".utf8)), "403")
        case .stall:
            guard takeFault(target, limit: settings.maximumPerTarget) else { return (normal, String(normal.status)) }
            var response = normal
            response.delay = .milliseconds(settings.stallMilliseconds)
            // Not "stall:<status>": the client gave up before the answer, so it was never accepted.
            return (response, "stall")
        case .reset:
            guard takeFault(target, limit: settings.maximumPerTarget) else { return (normal, String(normal.status)) }
            var response = normal
            response.connectionAction = .reset
            return (response, "reset")
        }
    }

    private func takeFault(_ target: String, limit: Int) -> Bool {
        faultsPerTarget.withLock { counts in
            guard counts[target, default: 0] < limit else { return false }
            counts[target, default: 0] += 1
            return true
        }
    }
}

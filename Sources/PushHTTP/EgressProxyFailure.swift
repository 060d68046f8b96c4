import Logging
import Metrics
import Synchronization

/// Why a tunnel through the egress proxy was not opened. Each is a connection failure (retryable, as any connection that
/// could not be opened), counted in `push_egress_proxy_failures_total{reason}` and logged once per reason per process,
/// naming the proxy's host and port, never its credentials.
enum EgressProxyFailure: Sendable, Equatable {
    /// The proxy answered 407: the credentials of the proxy URL are missing or wrong.
    case authenticationRequired(status: String)
    /// Any other answer than 2xx, or no valid answer.
    case refused(detail: String)
    /// The TCP connection to the proxy failed.
    case unreachable(detail: String)
    /// No answer within the connect timeout.
    case timedOut

    /// The metric's bounded label.
    enum Reason: String, CaseIterable, Sendable {
        case unreachable
        case authRequired = "auth_required"
        case refused
        case timeout
    }

    var reason: Reason {
        switch self {
        case .authenticationRequired: .authRequired
        case .refused: .refused
        case .unreachable: .unreachable
        case .timedOut: .timeout
        }
    }

    /// "the egress proxy proxy.corp:3128 refused CONNECT api.push.apple.com:443: 407 Proxy Authentication Required";
    /// without `target` for the log, where a host chosen by a job's producer (a Web Push endpoint) never goes.
    func message(proxy: EgressProxy, target: String?) -> String {
        let name = "the egress proxy \(proxy.authority)"
        let connect = target.map { "CONNECT \($0)" } ?? "a CONNECT"
        return switch self {
        case .authenticationRequired(let status):
            "\(name) refused \(connect): \(status)"
                + (proxy.hasCredentials ? " (check the credentials in HTTPS_PROXY)" : " (HTTPS_PROXY names no credentials)")
        case .refused(let detail): "\(name) refused \(connect): \(detail)"
        case .unreachable(let detail): "\(name) cannot be reached: \(detail)"
        case .timedOut: "\(name) did not open a tunnel\(target.map { " to \($0)" } ?? "") within the connect timeout"
        }
    }

    /// Counts and logs the failure and returns the transport error requests fail with. `target` is the request's
    /// `host:port` (its name, also when the tunnel goes to a checked address: errors never show that address).
    func record(proxy: EgressProxy, target: String) -> HTTPTransportError {
        EgressProxyMetrics.shared.record(reason, message: message(proxy: proxy, target: nil))
        return .connectionFailed(message(proxy: proxy, target: target))
    }
}

/// `push_egress_proxy_failures_total{reason}` and the one log line per reason.
final class EgressProxyMetrics: Sendable {
    static let shared = EgressProxyMetrics()

    private let counters: [EgressProxyFailure.Reason: Counter]
    private let logged = Mutex<Set<EgressProxyFailure.Reason>>([])
    private let logger = Logger(label: "push.http.egress-proxy")

    private init() {
        var counters: [EgressProxyFailure.Reason: Counter] = [:]
        for reason in EgressProxyFailure.Reason.allCases {
            counters[reason] = Counter(label: "push_egress_proxy_failures_total", dimensions: [("reason", reason.rawValue)])
        }
        self.counters = counters
    }

    func record(_ reason: EgressProxyFailure.Reason, message: String) {
        counters[reason]?.increment()
        let first = logged.withLock { $0.insert(reason).inserted }
        if first {
            logger.warning(
                "\(message); later failures of this kind are only counted",
                metadata: ["reason": "\(reason.rawValue)", "metric": "push_egress_proxy_failures_total"])
        }
    }
}

/// What a provider plugin says about one delivery attempt. Plugins classify the
/// provider's answer; the pipeline alone decides on retries, outcomes and commits.
public enum DeliveryResult: Sendable, Equatable {
    /// The provider accepted the push.
    case delivered(providerMessageId: String?, httpStatus: Int?)
    /// The target is dead (unregistered, bad token): the binding should be removed.
    case rejected(reason: String, httpStatus: Int?, invalidSince: Int64? = nil)
    /// A transient failure (timeout, reset, 429, 5xx); `retryAfter` is the provider's own hint.
    case retryable(reason: String, httpStatus: Int?, retryAfter: Duration? = nil)
    /// A permanent failure that is not the target's fault; `action` says whether credentials are to blame.
    case failed(reason: String, httpStatus: Int?, action: Outcome.Action = .none)

    public var httpStatus: Int? {
        switch self {
        case .delivered(_, let status), .rejected(_, let status, _), .retryable(_, let status, _),
             .failed(_, let status, _):
            status
        }
    }
}

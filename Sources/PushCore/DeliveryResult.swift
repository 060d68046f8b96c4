/// What a provider plugin says about one delivery attempt. Plugins classify the
/// provider's answer; the pipeline alone decides on retries, outcomes and commits.
public enum DeliveryResult: Sendable, Equatable {
    /// The provider accepted the push; `truncated` when the plugin shortened the alert to fit (`AlertFitting`).
    case delivered(providerMessageId: String?, httpStatus: Int?, truncated: Bool = false)
    /// The provider says the token itself is dead (unregistered, expired, malformed): the binding should be removed —
    /// unless `token` names the half of a two-token binding that died (`BindingToken`), whose other half may live.
    case rejected(reason: String, httpStatus: Int?, invalidSince: Int64? = nil, token: BindingToken? = nil)
    /// A transient failure (timeout, reset, 429, 5xx); `retryAfter` is the provider's own hint.
    case retryable(reason: String, httpStatus: Int?, retryAfter: Duration? = nil)
    /// A permanent failure that is not the target's fault; `action` says whether credentials are to blame,
    /// `blame` which circuit such a credential failure opens.
    case failed(reason: String, httpStatus: Int?, action: Outcome.Action = .none, blame: CredentialBlame = .scope)

    /// The same result, marked as sent with a shortened alert when `truncated` (only a delivery says so).
    public func truncated(_ truncated: Bool) -> DeliveryResult {
        guard truncated, case .delivered(let messageId, let status, _) = self else { return self }
        return .delivered(providerMessageId: messageId, httpStatus: status, truncated: true)
    }

    public var httpStatus: Int? {
        switch self {
        case .delivered(_, let status, _), .rejected(_, let status, _, _), .retryable(_, let status, _),
            .failed(_, let status, _, _):
            status
        }
    }
}

/// How much a `check_credentials` failure says is broken, and so which circuit it opens.
public enum CredentialBlame: String, Sendable, Equatable {
    /// The delivery scope's credentials (an APNs key or certificate in one environment, an FCM project's
    /// service account): every send in the scope stops for the cool-down.
    case scope
    /// Credentials of one part of the scope only (`DeliveryScope.part`: the APNs or web credentials an FCM
    /// project holds for one platform): that part stops, the rest of the scope keeps sending.
    case part
    /// This request only (a token of another app or project, a topic this binding cannot use): no circuit opens.
    case request
}

/// What a provider prepares before it sends, out of line of its async `deliver` (whose frame every job
/// in flight keeps; docs/writing-a-provider.md): the request, or the result of not sending it.
public enum Prepared<Request> {
    case ready(Request)
    case refused(DeliveryResult)
}

import PushCore
import PushHTTP

/// FCM v1's error table. The FCM code is read from `error.details[]` of type
/// `google.firebase.fcm.v1.FcmError` (`error.status` says only RESOURCE_EXHAUSTED for a 429).
enum FCMResponse {
    static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    static let badRequestType = "type.googleapis.com/google.rpc.BadRequest"
    /// QUOTA_EXCEEDED without Retry-After waits this long (Google's guidance: at least a minute), and the longest a
    /// 429 holds the project's sends (`FCMProvider.scope(of:)`): Firebase serves 429 "until the quota is refilled in
    /// the following minute".
    static let quotaBackoff = Duration.seconds(60)

    struct ErrorBody {
        var status: String?
        var code: String?
        var message: String?
        var tokenViolation = false
        /// Whether the body is in Google's JSON error format (`{"error": {"code": <int>, "status": "…", …}}`,
        /// Google Cloud API design guide, "Errors"). An HTML page from a proxy or a wrong `PUSH_FCM_ENDPOINT` is not.
        var isGoogleError = false
    }

    static func errorBody(_ bytes: [UInt8]) -> ErrorBody {
        guard let error = (try? JSONParser.parse(bytes))?["error"] else { return ErrorBody() }
        var body = ErrorBody()
        if case .string(let status)? = error["status"] {
            body.status = status
            if case .integer? = error["code"] { body.isGoogleError = true }
        }
        if case .string(let message)? = error["message"] { body.message = message }
        if case .array(let details)? = error["details"] {
            for detail in details {
                if detail["@type"] == .string(fcmErrorType), case .string(let code)? = detail["errorCode"] { body.code = code }
                if detail["@type"] == .string(badRequestType), case .array(let violations)? = detail["fieldViolations"] {
                    body.tokenViolation = violations.contains { $0["field"] == .string("message.token") }
                }
            }
        }
        return body
    }

    static func classify(_ response: HTTPResponse) -> DeliveryResult {
        let status = response.status
        if status == 200 {
            let name: String? = if case .string(let value)? = (try? JSONParser.parse(response.body))?["name"] { value } else { nil }
            return .delivered(providerMessageId: name, httpStatus: status)
        }
        let error = errorBody(response.body)
        let code = error.code ?? error.status ?? "HTTP \(status)"
        let reason = error.message.map { "\(code): \($0)" } ?? code
        let retryAfter = HTTPDelivery.retryAfter(response)
        switch code {
        case "UNREGISTERED":
            return .rejected(reason: reason, httpStatus: status)
        case "SENDER_ID_MISMATCH":
            // The token belongs to another project: a routing or configuration problem of this binding, not a dead token.
            return .failed(reason: reason, httpStatus: status, action: .checkCredentials, blame: .request)
        case "INVALID_ARGUMENT":
            let aboutToken = error.tokenViolation || (error.message?.contains("registration token") ?? false)
            return aboutToken ? .rejected(reason: reason, httpStatus: status) : .failed(reason: reason, httpStatus: status)
        case "QUOTA_EXCEEDED":
            return .retryable(reason: reason, httpStatus: status, retryAfter: retryAfter ?? quotaBackoff)
        case "UNAVAILABLE", "INTERNAL":
            return .retryable(reason: reason, httpStatus: status, retryAfter: retryAfter)
        case "THIRD_PARTY_AUTH_ERROR", "APNS_AUTH_ERROR":
            // The APNs or web credentials the project holds for one platform; APNS_AUTH_ERROR is the older name
            // (firebase-admin maps it to THIRD_PARTY_AUTH_ERROR). The service account is fine: no token renewal.
            return .failed(reason: reason, httpStatus: status, action: .checkCredentials, blame: .part)
        case "PERMISSION_DENIED":
            return .failed(reason: reason, httpStatus: status, action: .checkCredentials)
        default:
            if status == 404 {
                // Google's own NOT_FOUND without an FcmError detail is an unregistered token (firebase-admin maps NOT_FOUND
                // so). Any other 404 did not come from FCM's send API: removing on it would wipe every binding of the project.
                if error.isGoogleError, error.status == "NOT_FOUND" { return .rejected(reason: reason, httpStatus: status) }
                return .failed(
                    reason: "HTTP 404 not in Google's error format: not FCM's answer (check PUSH_FCM_ENDPOINT "
                        + "and proxies); the binding is kept", httpStatus: status, action: .checkCredentials)
            }
            if status == 401 { return .failed(reason: reason, httpStatus: status, action: .checkCredentials) }
            // A 429 is a quota answer with or without its FcmError detail: the same floor as QUOTA_EXCEEDED.
            if status == 429 { return .retryable(reason: reason, httpStatus: status, retryAfter: retryAfter ?? quotaBackoff) }
            if status >= 500 { return .retryable(reason: reason, httpStatus: status, retryAfter: retryAfter) }
            return .failed(reason: reason, httpStatus: status)
        }
    }
}

import Foundation
import PushCore
import PushHTTP

/// Huawei's answer to `messages:send`: `{"code": "80000000", "msg": "Success", "requestId": "…"}`, classified by
/// the result `code`, which is read whatever the HTTP status (Huawei pairs no status with a code; a 503
/// may carry no JSON at all).
struct HMSAnswer {
    static let success = "80000000"
    static let partialSuccess = "80100000"
    static let allTokensInvalid = "80300007"
    /// OAuth: a missing or foreign access token, an expired one.
    static let accessTokenCodes: Set<String> = ["80200001", "80200003"]

    let status: Int
    let code: String?
    let message: String?
    let requestId: String?
    let retryAfter: Duration?

    init(_ response: HTTPResponse) {
        status = response.status
        let document = try? JSONParser.parse(response.body)
        code =
            switch document?["code"] {
            case .string(let text)?: text
            case .integer(let number)?: String(number)
            default: nil
            }
        if case .string(let text)? = document?["msg"] { message = text } else { message = nil }
        if case .string(let text)? = document?["requestId"], !text.isEmpty { requestId = text } else { requestId = nil }
        retryAfter = HTTPDelivery.retryAfter(response)
    }

    /// Whether Huawei refused the access token itself: worth one new token.
    var refusesAccessToken: Bool {
        code.map(Self.accessTokenCodes.contains) ?? (status == 401)
    }

    /// Whether a partial-success `msg` lists `token` as illegal. `msg` is a JSON string: v1 documents
    /// `{"success":…,"failure":…,"illegal_tokens":["…"]}`, newer answers group them by reason,
    /// `{"illegalTokens":{"noRight":["…"]}}`; both are read.
    func listsIllegal(_ token: String) -> Bool {
        guard let message, let document = try? JSONParser.parse(Array(message.utf8)) else { return false }
        func contains(_ value: JSONValue?) -> Bool {
            if case .array(let items)? = value { return items.contains(.string(token)) }
            return false
        }
        if contains(document["illegal_tokens"]) { return true }
        if case .object(let byReason)? = document["illegalTokens"] { return byReason.contains { contains($0.value) } }
        return contains(document["illegalTokens"])
    }
}

enum HMSResponse {
    /// Codes that say our request was wrong (the token may be fine): parameters, structure, TTL in the past,
    /// body over 4096 bytes, too many tokens.
    static let requestCodes: Set<String> = ["80100001", "80100003", "80100004", "80300008", "80300010"]
    /// Huawei's OAuth service refused our client.
    static let permissionCodes: Set<String> = ["80600003"]
    /// "No permission to send message to these tmIDs": Huawei's troubleshooting lists Push Kit being off for the app
    /// and a token of another app or project among its causes. Like 80300007, the answer is about this request's
    /// token: one foreign token must not stop every push of the app, so it opens no circuit.
    static let noPermissionForToken = "80300002"
    static let internalError = "81000001"

    /// `token` is the request's device token: a partial success names it when it is the one that failed.
    /// `targetNamesApp` says whether the target named its app (else the default app sent it): Huawei's
    /// troubleshooting lists "the token belongs to another app" among the causes of 80300007, so only a token
    /// refused by the app its target named is a dead token; under a guessed app the binding is kept (as APNs
    /// `DeviceTokenNotForTopic` keeps it), and one binding opens no circuit.
    static func classify(_ answer: HMSAnswer, token: String, targetNamesApp: Bool) -> DeliveryResult {
        let status = answer.status
        let reason = reason(answer, token: token)
        if status == 503 {
            return .retryable(reason: "flow control: \(reason)", httpStatus: status, retryAfter: answer.retryAfter)
        }
        switch answer.code {
        case HMSAnswer.success?:
            return .delivered(providerMessageId: answer.requestId, httpStatus: status)
        case HMSAnswer.partialSuccess?:
            // One token per request: a partial success that lists ours is a failure of our token alone.
            if answer.listsIllegal(token) {
                return .rejected(reason: "\(HMSAnswer.partialSuccess): the token is listed as illegal", httpStatus: status)
            }
            return .delivered(providerMessageId: answer.requestId, httpStatus: status)
        case HMSAnswer.allTokensInvalid?:
            guard targetNamesApp else {
                return .failed(
                    reason: "\(reason) (the target named no app: the token may belong to another app; the binding is kept)",
                    httpStatus: status, action: .checkCredentials, blame: .request)
            }
            return .rejected(reason: reason, httpStatus: status)
        case noPermissionForToken?:
            return .failed(reason: reason, httpStatus: status, action: .checkCredentials, blame: .request)
        case let code? where HMSAnswer.accessTokenCodes.contains(code) || permissionCodes.contains(code):
            return .failed(reason: reason, httpStatus: status, action: .checkCredentials)
        case let code? where requestCodes.contains(code):
            return .failed(reason: reason, httpStatus: status)
        case internalError?:
            return .retryable(reason: reason, httpStatus: status, retryAfter: answer.retryAfter)
        default:
            if answer.code == nil, status == 401 { return .failed(reason: reason, httpStatus: status, action: .checkCredentials) }
            if status >= 500 || status == 429 { return .retryable(reason: reason, httpStatus: status, retryAfter: answer.retryAfter) }
            return .failed(reason: reason, httpStatus: status)
        }
    }

    /// `80300007: <msg>` with Huawei's text cut short and the device token, should it be quoted, redacted.
    static func reason(_ answer: HMSAnswer, token: String) -> String {
        let code = answer.code ?? "HTTP \(answer.status)"
        guard let message = answer.message, !message.isEmpty else { return code }
        let redacted = token.isEmpty ? message : message.replacingOccurrences(of: token, with: Redaction.token(token))
        return "\(code): \(redacted.prefix(200))"
    }
}

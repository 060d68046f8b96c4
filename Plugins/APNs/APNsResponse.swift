import PushCore
import PushHTTP

/// Apple's status and reason table, mapped once.
enum APNsResponse {
    /// Reasons that mean the device token is dead for this topic: remove the binding.
    static let deadToken: Set<String> = ["BadDeviceToken", "DeviceTokenNotForTopic", "Unregistered", "ExpiredToken"]
    /// 403 reasons that blame our credentials.
    static let credentialReasons: Set<String> = [
        "BadCertificate", "BadCertificateEnvironment", "InvalidProviderToken", "MissingProviderToken", "Forbidden",
        "UnrelatedKeyIdInToken", "BadEnvironmentKeyInToken", "TopicDisallowed",
    ]

    static func classify(_ response: HTTPResponse) -> DeliveryResult {
        let status = response.status
        let body = try? JSONParser.parse(response.body)
        let reason: String = if case .string(let text)? = body?["reason"] { text } else { "HTTP \(status)" }
        switch status {
        case 200:
            return .delivered(providerMessageId: response.header("apns-id"), httpStatus: status)
        case 410:
            let since: Int64? = if case .integer(let milliseconds)? = body?["timestamp"] { milliseconds } else { nil }
            return .rejected(reason: reason, httpStatus: status, invalidSince: since)
        case 400 where deadToken.contains(reason):
            return .rejected(reason: reason, httpStatus: status)
        case 400 where reason == "IdleTimeout":
            return .retryable(reason: reason, httpStatus: status)
        case 403 where reason == "ExpiredProviderToken":
            return .retryable(reason: reason, httpStatus: status)
        case 403:
            // Every other 403 (credentialReasons and any reason Apple adds) blames the certificate or token.
            return .failed(reason: reason, httpStatus: status, action: .checkCredentials)
        case 429:
            return .retryable(reason: reason, httpStatus: status, retryAfter: HTTPDelivery.retryAfter(response))
        case 500...599:
            return .retryable(reason: reason, httpStatus: status, retryAfter: HTTPDelivery.retryAfter(response))
        default:
            // 400 (our request was wrong), 404 BadPath, 405, 413 PayloadTooLarge: resending cannot help.
            return .failed(reason: reason, httpStatus: status)
        }
    }
}

import PushCore
import PushHTTP

/// Apple's status and reason table ("Handling notification responses from APNs"), mapped once.
/// docs/providers/apns.md lists every row with its source.
enum APNsResponse {
    /// Reasons that say the device token itself is dead: remove the binding. 410 Unregistered ("the
    /// device token is inactive for the specified topic") and ExpiredToken; 400 BadDeviceToken.
    static let deadToken: Set<String> = ["BadDeviceToken", "Unregistered", "ExpiredToken"]
    /// 400 reasons about the topic we sent. Our configuration causes them (a wrong bundle id, topic
    /// override or certificate; the Mizu seed's FAQ treats DeviceTokenNotForTopic as a topic setting to
    /// fix), so they remove nothing. They concern this request's topic, so they open no circuit either.
    static let topicReasons: Set<String> = ["DeviceTokenNotForTopic", "MissingTopic", "TopicDisallowed", "BadTopic"]
    /// 403 UnrelatedKeyIdInToken: "The key ID in the provider token isn't related to the key ID of the token used in the
    /// first push of this connection. To use this token, open a new connection." Our connections are per signing key
    /// (`HTTPRequest.connectionIdentity`), so this answer is a defect of ours, not a credential failure: the request is
    /// sent again (on a connection of its own key), and no credential circuit opens.
    static let unrelatedKeyId = "UnrelatedKeyIdInToken"
    /// The environment a binding that names none was sent to, as a BadDeviceToken's reason says it.
    static let defaultEnvironmentGuess = "the app's default environment (the binding names none)"
    static let rfc8599ProductionGuess =
        "production, which RFC 8599 pn-provider=apns does not name (a development build's token sent there is answered so)"

    /// - Parameter environmentNamed: the binding named its environment (`APNsTarget.namesEnvironment`: a target's
    ///   `environment`, RFC 8599 `apns.dev`, X-MPUSH `s:`/`p:`). Apple: BadDeviceToken means "the specified device token
    ///   is invalid. Verify that the request contains a valid token and that the token matches the environment", so
    ///   when the environment was a guess — the app's default, or production for RFC 8599's `apns`, which names none —
    ///   the token may be alive in the other one: one wrong `environment` setting, or one development build registering
    ///   `apns`, must not delete bindings. Such a binding stays: `failed`, check_credentials, and no circuit (the next
    ///   binding may name its environment).
    /// - Parameter guessedEnvironment: where the push went when the binding named no environment, for the reason.
    static func classify(
        _ response: HTTPResponse, environmentNamed: Bool = true, guessedEnvironment: String = defaultEnvironmentGuess
    ) -> DeliveryResult {
        let status = response.status
        let body = try? JSONParser.parse(response.body)
        let reason: String = if case .string(let text)? = body?["reason"] { text } else { "HTTP \(status)" }
        switch status {
        case 200:
            return .delivered(providerMessageId: response.header("apns-id"), httpStatus: status)
        case 410:
            let since: Int64? = if case .integer(let milliseconds)? = body?["timestamp"] { milliseconds } else { nil }
            return .rejected(reason: reason, httpStatus: status, invalidSince: since)
        case 400 where reason == "BadDeviceToken" && !environmentNamed:
            return .failed(
                reason: "BadDeviceToken in \(guessedEnvironment): kept",
                httpStatus: status, action: .checkCredentials, blame: .request)
        case 400 where deadToken.contains(reason):
            return .rejected(reason: reason, httpStatus: status)
        case 400 where topicReasons.contains(reason):
            return .failed(reason: reason, httpStatus: status, action: .checkCredentials, blame: .request)
        case 400 where reason == "IdleTimeout":
            return .retryable(reason: reason, httpStatus: status)
        case 403 where reason == "ExpiredProviderToken":
            return .retryable(reason: reason, httpStatus: status)
        case 403 where reason == unrelatedKeyId:
            return .retryable(reason: reason, httpStatus: status)
        case 403:
            // Apple's status table: a 403 is "an error with the certificate or with the provider authentication
            // token" (BadCertificate, BadCertificateEnvironment, InvalidProviderToken, BadEnvironmentKeyInToken, …,
            // and whatever reason a newer APNs adds): the circuit of (app, environment) opens.
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

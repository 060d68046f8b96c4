import PushCore

/// The push-proxy request entity, field for field as the BlackBerry Spark spec gives it:
/// `{version, expiry, userId, isStatus, body, endpointData: [{endpointId, platform, tokenType, token, pushType}]}`.
/// One request carries the endpoints of one job's targets at one proxy ("all endpoints for the userId").
enum ProxyRequestBody {
    static let version = "0.2"

    static func encode(_ delivery: Delivery) -> [UInt8] { encode([delivery]) }

    /// - Parameter deliveries: deliveries of one job (same user, kind, body and TTL), one per endpoint.
    static func encode(_ deliveries: [Delivery]) -> [UInt8] {
        guard let delivery = deliveries.first else { return [] }
        let job = delivery.job
        var writer = JSONWriter(capacity: 512)
        writer.beginObject()
        writer.member("version", version)
        writer.member("expiry", delivery.remainingTTLSeconds)
        writer.member("userId", job.userId)
        writer.member("isStatus", isStatus(job.kind))
        // Without an opaque `body`, the proxy gets the job's summary JSON, as a string.
        if let body = job.body { writer.member("body", body) } else { writer.member("body", quoting: job.summaryJSON()) }
        writer.key("endpointData")
        writer.beginArray()
        for endpoint in deliveries {
            let target = endpoint.target.details(ProxyTarget.self) ?? ProxyTarget()
            writer.beginObject()
            writer.member("endpointId", endpoint.target.bindingId)
            if let platform = target.platform { writer.member("platform", platform) }
            if let tokenType = target.tokenType { writer.member("tokenType", tokenType) }
            if let token = target.token { writer.member("token", token) }
            writer.member("pushType", target.pushType ?? defaultPushType(job.kind))
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return writer.bytes
    }

    /// Status pushes update state without alerting the user: cancels and wake-ups.
    static func isStatus(_ kind: JobKind) -> Bool { kind == .cancel || kind == .wake }

    /// Calls and their cancellations need VoIP pushes; everything else is an ordinary ("im") push.
    static func defaultPushType(_ kind: JobKind) -> String {
        switch kind {
        case .call, .cancel: "voip"
        case .message, .custom, .wake: "im"
        }
    }
}

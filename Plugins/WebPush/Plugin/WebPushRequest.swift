import PushCore
import PushCrypto

/// RFC 8030 headers and the RFC 8291 body for one delivery.
enum WebPushRequest {
    /// The push service must accept 4096 bytes of (encrypted) payload.
    static let maximumBody = 4096
    /// The largest message that still fits once encrypted (RFC 8291: 3993 bytes in one aes128gcm record).
    static let largestPlaintext = maximumBody - WebPushEncryption.overhead

    /// `Urgency` (RFC 8030 §5.3): calls and their cancels must wake the device now;
    /// messages follow the job priority; wake-ups can wait for a good moment.
    static func urgency(_ job: Job) -> String {
        switch job.kind {
        case .call, .cancel: "high"
        case .message, .custom: job.priority == .high ? "high" : "normal"
        case .wake: "low"
        }
    }

    /// `Topic` (RFC 8030 §5.4): at most 32 base64url characters. Other keys become the
    /// first 32 characters of their SHA-256 in base64url: still stable per collapse key.
    static func topic(_ collapseKey: String) -> String {
        if collapseKey.utf8.count <= 32, collapseKey.utf8.allSatisfy(isBase64URLCharacter) { return collapseKey }
        return String(Base64URL.encode(Digest.sha256(Array(collapseKey.utf8))).prefix(32))
    }

    /// RFC 4648 §5: letters, digits, `-` and `_`.
    private static func isBase64URLCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    static func headers(_ delivery: Delivery) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [
            ("ttl", String(delivery.remainingTTLSeconds)),
            ("urgency", urgency(delivery.job)),
            ("content-encoding", "aes128gcm"),
            ("content-type", "application/octet-stream"),
        ]
        if let collapseKey = delivery.job.collapseKey { headers.append(("topic", topic(collapseKey))) }
        return headers
    }
}

import PushCore
import PushCrypto

/// Apple's `apns-collapse-id` header: "The value of this key must not exceed 64 bytes" (Apple, "Sending
/// notification requests to APNs", header fields). A longer collapse key becomes its SHA-256 in hex, exactly 64
/// bytes and stable, so pushes with the same key still replace each other. Used by every plugin that talks to
/// APNs, directly (the APNs plugin) or through FCM's `apns.headers`.
public enum AppleCollapseId {
    public static let largestBytes = 64

    public static func header(for key: String) -> String {
        key.utf8.count <= largestBytes ? key : Digest.hex(Digest.sha256(Array(key.utf8)))
    }
}

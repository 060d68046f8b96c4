import Foundation
import PushCore
import PushCrypto

/// The VAPID key file: a PEM private key, or the 32-byte private scalar in base64url (the
/// form most Web Push libraries print).
public enum VAPIDKeyFile {
    public static func load(_ path: String) throws -> PrivateKey {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw CryptoError("\(path) does not exist or is not readable")
        }
        if text.contains("-----BEGIN") { return try PrivateKey(pem: text) }
        guard let scalar = Base64URL.decode(text.trimmingCharacters(in: .whitespacesAndNewlines)), scalar.count == 32 else {
            throw CryptoError("\(path) holds neither a PEM private key nor a base64url 32-byte P-256 key")
        }
        return try PrivateKey.p256(rawPrivateKey: scalar)
    }

    /// What `push-worker vapid-keys` prints for a key.
    public static func describe(_ key: PrivateKey) throws -> String {
        """
        # VAPID key pair (P-256). Keep the private key secret; give browsers the public key
        # as applicationServerKey in pushManager.subscribe().
        public key (base64url, applicationServerKey): \(Base64URL.encode(try key.rawPublicKey()))
        private key (base64url, for PUSH_WEBPUSH_VAPID_KEY_FILE): \(Base64URL.encode(try key.rawPrivateKey()))
        private key (PEM, also accepted by PUSH_WEBPUSH_VAPID_KEY_FILE):
        \(try key.pem())
        """
    }
}

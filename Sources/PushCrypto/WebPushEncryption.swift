import COpenSSL

/// RFC 8291 message encryption for Web Push, `aes128gcm` content coding (RFC 8188), one record.
///
///     PRK_key = HMAC(auth_secret, ecdh_secret)
///     IKM     = HMAC(PRK_key, "WebPush: info" ‖ 0 ‖ ua_public ‖ as_public ‖ 1)
///     PRK     = HMAC(salt, IKM)
///     CEK     = HMAC(PRK, "Content-Encoding: aes128gcm" ‖ 0 ‖ 1)[0..<16]
///     NONCE   = HMAC(PRK, "Content-Encoding: nonce" ‖ 0 ‖ 1)[0..<12]
///     body    = salt ‖ rs (4 bytes) ‖ idlen (65) ‖ as_public ‖ AES-128-GCM(CEK, NONCE, plaintext ‖ 0x02)
public enum WebPushEncryption {
    public static let recordSize: UInt32 = 4096
    /// Bytes the encoding adds to a plaintext: header (86), padding delimiter (1), tag (16).
    public static let overhead = 16 + 4 + 1 + 65 + 1 + 16

    public struct Keys: Equatable, Sendable {
        public let contentEncryptionKey: [UInt8]
        public let nonce: [UInt8]
    }

    /// Derives the content key and nonce (exposed for the RFC 8291 Appendix A check).
    public static func keys(
        ecdhSecret: [UInt8], authSecret: [UInt8], uaPublic: [UInt8], asPublic: [UInt8],
        salt: [UInt8]
    ) -> Keys {
        let prkKey = HMACSHA256.authenticate(ecdhSecret, key: authSecret)
        let ikm = HMACSHA256.authenticate(Array("WebPush: info".utf8) + [0] + uaPublic + asPublic + [1], key: prkKey)
        let prk = HMACSHA256.authenticate(ikm, key: salt)
        let cek = Array(HMACSHA256.authenticate(Array("Content-Encoding: aes128gcm".utf8) + [0, 1], key: prk).prefix(16))
        let nonce = Array(HMACSHA256.authenticate(Array("Content-Encoding: nonce".utf8) + [0, 1], key: prk).prefix(12))
        return Keys(contentEncryptionKey: cek, nonce: nonce)
    }

    /// Encrypts `plaintext` for a subscription (`p256dh` = uaPublic, `auth` = authSecret) with a given sender key
    /// and salt (the RFC's fixed example).
    public static func encrypt(
        _ plaintext: [UInt8], uaPublic: [UInt8], authSecret: [UInt8],
        senderKey: PrivateKey, salt: [UInt8]
    ) throws(CryptoError) -> [UInt8] {
        let agreement = KeyAgreement(senderPublic: try senderKey.rawPublicKey(), secret: try senderKey.sharedSecret(withPeer: uaPublic))
        return try seal(plaintext, uaPublic: uaPublic, authSecret: authSecret, agreement: agreement, salt: salt)
    }

    /// Encrypts with a fresh sender key and a random salt. RFC 8291 sends the sender's public key in each message's
    /// header (`keyid`) and derives that message's key from it; a new key per message keeps one recovered key from
    /// opening any other message.
    public static func encrypt(_ plaintext: [UInt8], uaPublic: [UInt8], authSecret: [UInt8]) throws(CryptoError) -> [UInt8] {
        try seal(
            plaintext, uaPublic: uaPublic, authSecret: authSecret, agreement: try .ephemeral(withPeer: uaPublic),
            salt: try RandomBytes.generate(16))
    }

    /// The sender's public key and the ECDH secret of one message.
    struct KeyAgreement {
        let senderPublic: [UInt8]
        let secret: [UInt8]

        /// Made once and only read: each key copies it.
        private nonisolated(unsafe) static let p256 = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1)

        /// A fresh P-256 sender key pair and its secret with `peer`, the subscription's uncompressed point.
        static func ephemeral(withPeer peer: [UInt8]) throws(CryptoError) -> KeyAgreement {
            guard peer.count == 65, peer[0] == 0x04 else { throw CryptoError("a P-256 public key is a 65-byte uncompressed point") }
            var senderPublic = [UInt8](repeating: 0, count: 65)
            var secret = [UInt8](repeating: 0, count: 32)
            guard let group = p256, push_p256_ephemeral_agreement(group, peer, peer.count, &senderPublic, &secret) == 1 else {
                throw .openSSL("P-256 key agreement (not a point on the curve?)")
            }
            return KeyAgreement(senderPublic: senderPublic, secret: secret)
        }
    }

    private static func seal(
        _ plaintext: [UInt8], uaPublic: [UInt8], authSecret: [UInt8], agreement: KeyAgreement, salt: [UInt8]
    ) throws(CryptoError) -> [UInt8] {
        guard salt.count == 16 else { throw CryptoError("the salt is 16 bytes") }
        guard authSecret.count == 16 else { throw CryptoError("the auth secret is 16 bytes, got \(authSecret.count)") }
        guard plaintext.count + overhead <= Int(recordSize) + 86 else { throw CryptoError("the plaintext does not fit one record") }
        let asPublic = agreement.senderPublic
        let keys = keys(ecdhSecret: agreement.secret, authSecret: authSecret, uaPublic: uaPublic, asPublic: asPublic, salt: salt)
        let sealed = try AES128GCM.seal(plaintext + [0x02], key: keys.contentEncryptionKey, nonce: keys.nonce)
        let rs = recordSize
        let header =
            salt + [UInt8(rs >> 24 & 0xFF), UInt8(rs >> 16 & 0xFF), UInt8(rs >> 8 & 0xFF), UInt8(rs & 0xFF)]
            + [UInt8(asPublic.count)] + asPublic
        return header + sealed
    }

    /// What a user agent does: decrypts a single-record body with its subscription key.
    public static func decrypt(_ body: [UInt8], uaKey: PrivateKey, authSecret: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard body.count > 21 else { throw CryptoError("body shorter than the aes128gcm header") }
        let salt = Array(body[0..<16])
        let idLength = Int(body[20])
        guard idLength == 65, body.count >= 21 + idLength + 17 else { throw CryptoError("keyid must be the 65-byte sender key") }
        let asPublic = Array(body[21..<(21 + idLength)])
        let sealed = Array(body[(21 + idLength)...])
        let uaPublic = try uaKey.rawPublicKey()
        let secret = try uaKey.sharedSecret(withPeer: asPublic)
        let keys = keys(ecdhSecret: secret, authSecret: authSecret, uaPublic: uaPublic, asPublic: asPublic, salt: salt)
        guard var padded = AES128GCM.open(sealed, key: keys.contentEncryptionKey, nonce: keys.nonce) else {
            throw CryptoError("authentication tag does not verify")
        }
        while let last = padded.last, last == 0 { padded.removeLast() }
        guard padded.last == 0x02 else { throw CryptoError("missing last-record padding delimiter") }
        padded.removeLast()
        return padded
    }
}

public enum RandomBytes {
    public static func generate(_ count: Int) throws(CryptoError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else { throw .openSSL("RAND_bytes") }
        return bytes
    }
}

import COpenSSL

/// NIST P-256 keys in the raw forms Web Push uses: 65-byte uncompressed points and
/// 32-byte private scalars.
extension PrivateKey {
    /// DER prefix and suffix of a SEC1 ECPrivateKey on prime256v1 (without the public key, which OpenSSL derives).
    private static let sec1Prefix: [UInt8] = [0x30, 0x31, 0x02, 0x01, 0x01, 0x04, 0x20]
    private static let sec1Suffix: [UInt8] = [0xA0, 0x0A, 0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]

    /// A P-256 key from its 32-byte private scalar.
    public static func p256(rawPrivateKey scalar: [UInt8]) throws(CryptoError) -> PrivateKey {
        guard scalar.count == 32 else { throw CryptoError("a P-256 private key is 32 bytes, got \(scalar.count)") }
        let der = sec1Prefix + scalar + sec1Suffix
        let key = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var cursor = buffer.baseAddress
            return d2i_AutoPrivateKey(nil, &cursor, buffer.count)
        }
        guard let key else { throw .openSSL("P-256 private key") }
        return PrivateKey(owning: key)
    }

    /// The public key as an uncompressed point (0x04 ‖ x ‖ y, 65 bytes).
    public func rawPublicKey() throws(CryptoError) -> [UInt8] {
        var point = [UInt8](repeating: 0, count: 65)
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pointer, OSSL_PKEY_PARAM_PUB_KEY, &point, point.count, &length) == 1, length == 65
        else { throw .openSSL("raw public key") }
        return point
    }

    /// The 32-byte private scalar.
    public func rawPrivateKey() throws(CryptoError) -> [UInt8] {
        var number: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pointer, OSSL_PKEY_PARAM_PRIV_KEY, &number) == 1, let number else {
            throw .openSSL("raw private key")
        }
        defer { BN_clear_free(number) }
        var scalar = [UInt8](repeating: 0, count: 32)
        guard BN_bn2binpad(number, &scalar, 32) == 32 else { throw .openSSL("BN_bn2binpad") }
        return scalar
    }

    /// ECDH with a peer's uncompressed P-256 point.
    public func sharedSecret(withPeer rawPublicKey: [UInt8]) throws(CryptoError) -> [UInt8] {
        let peer = try PublicKey(p256: rawPublicKey)
        guard let context = EVP_PKEY_CTX_new(pointer, nil) else { throw .openSSL("EVP_PKEY_CTX_new") }
        defer { EVP_PKEY_CTX_free(context) }
        var length = 0
        // The peer key's point was checked to lie on the curve when it was imported; P-256 has
        // cofactor 1, so the full public-key check of EVP_PKEY_derive_set_peer (a second scalar
        // multiplication, half the cost of the derive) adds nothing.
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer_ex(context, peer.pointer, 0) == 1,
            EVP_PKEY_derive(context, nil, &length) == 1
        else { throw .openSSL("ECDH") }
        var secret = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_derive(context, &secret, &length) == 1 else { throw .openSSL("ECDH derive") }
        return Array(secret.prefix(length))
    }
}

extension PublicKey {
    /// A P-256 public key from its uncompressed point; refuses points not on the curve.
    public convenience init(p256 point: [UInt8]) throws(CryptoError) {
        guard point.count == 65, point[0] == 0x04 else { throw CryptoError("a P-256 public key is a 65-byte uncompressed point") }
        guard let key = push_p256_public_key(point, point.count) else { throw .openSSL("P-256 public key (not a point on the curve?)") }
        self.init(owning: key)
    }
}

public enum HMACSHA256 {
    public static func authenticate(_ data: [UInt8], key: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        push_hmac_sha256(key, key.count, data, data.count, &output)
        return output
    }
}

public enum AES128GCM {
    /// Fetched once: `EVP_aes_128_gcm()` makes every `EVP_EncryptInit_ex` fetch the cipher from the provider again.
    private nonisolated(unsafe) static let cipher = EVP_CIPHER_fetch(nil, "AES-128-GCM", nil) ?? EVP_aes_128_gcm()

    /// Ciphertext followed by the 16-byte tag.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == 16, nonce.count == 12, let context = EVP_CIPHER_CTX_new() else { throw CryptoError("AES-128-GCM setup") }
        defer { EVP_CIPHER_CTX_free(context) }
        var output = [UInt8](repeating: 0, count: plaintext.count + 16)
        var length: Int32 = 0
        var finalLength: Int32 = 0
        guard EVP_EncryptInit_ex(context, cipher, nil, key, nonce) == 1,
            EVP_EncryptUpdate(context, &output, &length, plaintext, Int32(plaintext.count)) == 1,
            output.withUnsafeMutableBufferPointer({ EVP_EncryptFinal_ex(context, $0.baseAddress! + Int(length), &finalLength) }) == 1,
            output.withUnsafeMutableBufferPointer({
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, $0.baseAddress! + Int(length + finalLength))
            }) == 1
        else { throw .openSSL("AES-128-GCM encrypt") }
        return Array(output.prefix(Int(length + finalLength) + 16))
    }

    /// The plaintext, or nil when the tag does not verify.
    public static func open(_ sealed: [UInt8], key: [UInt8], nonce: [UInt8]) -> [UInt8]? {
        guard key.count == 16, nonce.count == 12, sealed.count >= 16, let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        let ciphertext = Array(sealed.dropLast(16))
        var tag = Array(sealed.suffix(16))
        var output = [UInt8](repeating: 0, count: ciphertext.count + 16)
        var length: Int32 = 0
        var finalLength: Int32 = 0
        guard EVP_DecryptInit_ex(context, cipher, nil, key, nonce) == 1,
            EVP_DecryptUpdate(context, &output, &length, ciphertext, Int32(ciphertext.count)) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, &tag) == 1,
            output.withUnsafeMutableBufferPointer({ EVP_DecryptFinal_ex(context, $0.baseAddress! + Int(length), &finalLength) }) == 1
        else { return nil }
        return Array(output.prefix(Int(length + finalLength)))
    }
}

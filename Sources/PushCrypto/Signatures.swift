import COpenSSL

extension PrivateKey {
    /// ES256 (ECDSA P-256 over SHA-256) as JWS wants it: raw r‖s, 64 bytes.
    public func signES256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        let der = try digestSign(message)
        guard
            let signature = der.withUnsafeBufferPointer({ buffer -> OpaquePointer? in
                var cursor = buffer.baseAddress
                return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
            })
        else { throw .openSSL("d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(signature) }
        var r: OpaquePointer?
        var s: OpaquePointer?
        ECDSA_SIG_get0(signature, &r, &s)
        var raw = [UInt8](repeating: 0, count: 64)
        guard let r, let s,
            raw.withUnsafeMutableBufferPointer({
                BN_bn2binpad(r, $0.baseAddress, 32) == 32 && BN_bn2binpad(s, $0.baseAddress! + 32, 32) == 32
            })
        else { throw .openSSL("BN_bn2binpad") }
        return raw
    }

    /// RS256 (RSASSA-PKCS1-v1_5 over SHA-256).
    public func signRS256(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        try digestSign(message)
    }

    private func digestSign(_ message: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw .openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, pointer) == 1 else { throw .openSSL("EVP_DigestSignInit") }
        var length = 0
        guard EVP_DigestSign(context, nil, &length, message, message.count) == 1 else { throw .openSSL("EVP_DigestSign size") }
        var signature = [UInt8](repeating: 0, count: length)
        guard EVP_DigestSign(context, &signature, &length, message, message.count) == 1 else { throw .openSSL("EVP_DigestSign") }
        return Array(signature.prefix(length))
    }

    /// SubjectPublicKeyInfo PEM of this key's public half.
    public func publicKeyPEM() throws(CryptoError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PUBKEY(bio, pointer) == 1 else { throw .openSSL("PEM_write_bio_PUBKEY") }
        return drain(bio)
    }
}

/// Owns an OpenSSL public key, for verifying signatures (sandboxes check what providers check).
public final class PublicKey: @unchecked Sendable {
    let pointer: OpaquePointer

    public convenience init(pem: String) throws(CryptoError) {
        let key = pem.utf8CString.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count - 1)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }
        guard let key else { throw .openSSL("PEM public key") }
        self.init(owning: key)
    }

    init(owning pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    /// Verifies a raw r‖s ES256 signature.
    public func verifyES256(_ message: [UInt8], signature raw: [UInt8]) -> Bool {
        guard raw.count == 64, let signature = ECDSA_SIG_new() else { return false }
        defer { ECDSA_SIG_free(signature) }
        let r = BN_bin2bn(raw, 32, nil)
        let s = raw.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return false
        }
        var derPointer: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &derPointer)
        guard length > 0, let derPointer else { return false }
        defer { push_openssl_free(derPointer) }
        return verify(message, signature: Array(UnsafeBufferPointer(start: derPointer, count: Int(length))))
    }

    /// Verifies an RS256 signature.
    public func verifyRS256(_ message: [UInt8], signature: [UInt8]) -> Bool { verify(message, signature: signature) }

    private func verify(_ message: [UInt8], signature: [UInt8]) -> Bool {
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, pointer) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }
}

import COpenSSL

/// Owns an OpenSSL `EVP_PKEY`.
public final class PrivateKey: @unchecked Sendable {
    let pointer: OpaquePointer

    init(owning pointer: OpaquePointer) { self.pointer = pointer }

    deinit { EVP_PKEY_free(pointer) }

    /// A fresh NIST P-256 key pair.
    public static func generateP256() throws(CryptoError) -> PrivateKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
            EVP_PKEY_generate(context, &key) == 1, let key
        else { throw .openSSL("P-256 key generation") }
        return PrivateKey(owning: key)
    }

    /// A fresh RSA key pair (service-account keys in tests and sandboxes).
    public static func generateRSA(bits: Int = 2048) throws(CryptoError) -> PrivateKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "RSA", nil) else { throw .openSSL("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_rsa_keygen_bits(context, Int32(bits)) == 1,
            EVP_PKEY_generate(context, &key) == 1, let key
        else { throw .openSSL("RSA key generation") }
        return PrivateKey(owning: key)
    }

    /// Reads a PEM private key (PKCS#8 or traditional).
    public convenience init(pem: String) throws(CryptoError) {
        // A memory BIO borrows its buffer: keep the bytes alive while OpenSSL reads them.
        let key = pem.utf8CString.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count - 1)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let key else { throw .openSSL("PEM private key") }
        self.init(owning: key)
    }

    /// PKCS#8 PEM.
    public func pem() throws(CryptoError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_PrivateKey(bio, pointer, nil, nil, 0, nil, nil) == 1 else { throw .openSSL("PEM_write_bio_PrivateKey") }
        return drain(bio)
    }
}

import COpenSSL

/// An issued certificate with its key, in PEM.
public struct IssuedCertificate: Sendable {
    public let certificatePEM: String
    public let privateKeyPEM: String
}

/// A throwaway certificate authority for sandboxes: issues server certificates for
/// loopback names and client certificates for mutual TLS. Never for production trust.
public final class CertificateAuthority: @unchecked Sendable {
    private let key: PrivateKey
    private let certificate: OpaquePointer
    public let certificatePEM: String

    public init(commonName: String = "push-worker sandbox CA") throws(CryptoError) {
        key = try PrivateKey.generateP256()
        certificate = try Self.makeCertificate(
            commonName: commonName, publicKey: key, issuer: nil, signer: key,
            extensions: [
                (NID_basic_constraints, "critical,CA:TRUE"),
                (NID_key_usage, "critical,keyCertSign,cRLSign"),
            ])
        certificatePEM = try Self.pem(certificate)
    }

    deinit { X509_free(certificate) }

    /// A server certificate valid for `names` (DNS names or IP literals).
    public func issueServerCertificate(names: [String] = ["localhost", "127.0.0.1"]) throws(CryptoError) -> IssuedCertificate {
        let alternativeNames = names.map { $0.allSatisfy { $0.isNumber || $0 == "." || $0 == ":" } ? "IP:\($0)" : "DNS:\($0)" }
        return try issue(
            commonName: names.first ?? "localhost",
            extensions: [
                (NID_basic_constraints, "critical,CA:FALSE"),
                (NID_subject_alt_name, alternativeNames.joined(separator: ",")),
                (NID_ext_key_usage, "serverAuth"),
            ])
    }

    public func issueClientCertificate(commonName: String) throws(CryptoError) -> IssuedCertificate {
        try issue(
            commonName: commonName,
            extensions: [
                (NID_basic_constraints, "critical,CA:FALSE"),
                (NID_ext_key_usage, "clientAuth"),
            ])
    }

    private func issue(commonName: String, extensions: [(Int32, String)]) throws(CryptoError) -> IssuedCertificate {
        let leafKey = try PrivateKey.generateP256()
        let leaf = try Self.makeCertificate(
            commonName: commonName, publicKey: leafKey, issuer: certificate, signer: key,
            extensions: extensions)
        defer { X509_free(leaf) }
        return IssuedCertificate(certificatePEM: try Self.pem(leaf), privateKeyPEM: try leafKey.pem())
    }

    private static func makeCertificate(
        commonName: String, publicKey: PrivateKey, issuer: OpaquePointer?,
        signer: PrivateKey, extensions: [(Int32, String)]
    ) throws(CryptoError) -> OpaquePointer {
        guard let certificate = X509_new() else { throw .openSSL("X509_new") }
        var serial = [UInt8](repeating: 0, count: 8)
        RAND_bytes(&serial, Int32(serial.count))
        let serialNumber = serial.reduce(0) { $0 << 8 | Int($1) } & Int.max
        guard X509_set_version(certificate, 2) == 1,
            ASN1_INTEGER_set(X509_get_serialNumber(certificate), serialNumber) == 1,
            X509_gmtime_adj(X509_getm_notBefore(certificate), -3600) != nil,
            X509_gmtime_adj(X509_getm_notAfter(certificate), 60 * 60 * 24 * 365) != nil,
            X509_set_pubkey(certificate, publicKey.pointer) == 1,
            X509_NAME_add_entry_by_txt(X509_get_subject_name(certificate), "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1,
            X509_set_issuer_name(certificate, X509_get_subject_name(issuer ?? certificate)) == 1
        else {
            X509_free(certificate)
            throw .openSSL("certificate fields")
        }
        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer ?? certificate, certificate, nil, nil, 0)
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                X509_free(certificate)
                throw .openSSL("extension \(value)")
            }
            X509_add_ext(certificate, ext, -1)
            X509_EXTENSION_free(ext)
        }
        guard X509_sign(certificate, signer.pointer, EVP_sha256()) > 0 else {
            X509_free(certificate)
            throw .openSSL("X509_sign")
        }
        return certificate
    }

    private static func pem(_ certificate: OpaquePointer) throws(CryptoError) -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw .openSSL("BIO_new") }
        defer { BIO_free(bio) }
        guard PEM_write_bio_X509(bio, certificate) == 1 else { throw .openSSL("PEM_write_bio_X509") }
        return drain(bio)
    }
}

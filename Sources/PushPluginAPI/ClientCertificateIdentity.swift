import PushCore
import PushCrypto
import PushHTTP

extension TLSOptions {
    /// The connection identity of this client certificate: the SHA-256 of the certificate's and key's bytes as read with
    /// the configuration (`CredentialFile`), the same bytes its connections' TLS context is made of, so a certificate
    /// rotated at the same path gets connections of its own once a new version has read it (requests in flight finish on
    /// the old ones) and two apps with the same certificate share them. nil without a client certificate, or when a file
    /// was refused (the connection then fails on that file, as it would without an identity).
    /// A provider reads it when it is built from its configuration, never per request.
    public var clientCertificateIdentity: ConnectionIdentity? {
        guard let clientCertificateFile, clientCertificateFile.problem == nil else { return nil }
        // Each file hashed on its own, so no two pairs of files run together into the same bytes.
        var digests = clientCertificateFile.sha256
        if let clientKeyFile, clientKeyFile.path != clientCertificateFile.path {
            guard clientKeyFile.problem == nil else { return nil }
            digests += clientKeyFile.sha256
        }
        return ConnectionIdentity("certificate sha256:" + Digest.hex(Digest.sha256(digests)))
    }
}

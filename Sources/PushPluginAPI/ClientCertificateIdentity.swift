import Foundation
import PushCore
import PushCrypto
import PushHTTP

extension TLSOptions {
    /// The connection identity of this client certificate: the SHA-256 of the certificate's and key's bytes as they are
    /// now, so a certificate rotated at the same path gets connections of its own (requests in flight finish on the old
    /// ones) and two apps with the same certificate share them. nil without a client certificate, or when a file cannot
    /// be read (the connection then fails on that file, as it would without an identity).
    /// A provider reads it when it is built from its configuration, never per request.
    public var clientCertificateIdentity: ConnectionIdentity? {
        guard let certificateFile = clientCertificateFile,
            let certificate = FileManager.default.contents(atPath: certificateFile)
        else { return nil }
        // Each file hashed on its own, so no two pairs of files run together into the same bytes.
        var digests = Digest.sha256(Array(certificate))
        if let clientKeyFile, clientKeyFile != certificateFile {
            guard let key = FileManager.default.contents(atPath: clientKeyFile) else { return nil }
            digests += Digest.sha256(Array(key))
        }
        return ConnectionIdentity("certificate sha256:" + Digest.hex(Digest.sha256(digests)))
    }
}

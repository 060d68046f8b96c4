import NIOSSL

/// TLS settings for a request. Verification of the server is always on; `caFile` replaces the system trust store (a
/// sandbox or private CA).
///
/// The files are carried as read (`CredentialFile`): a provider reads them once, with the configuration version that
/// names them, and every connection it opens uses those bytes, whatever the paths hold by then. Two options are equal
/// when their files' paths and SHA-256 digests are, so connection pools and TLS contexts are keyed by the bytes used.
public struct TLSOptions: Sendable, Hashable {
    public enum CertificateFormat: String, Sendable, Hashable {
        case pem = "PEM"
        /// PKCS#12 (`.p12`): certificate and key in one file, usually with a password.
        case pkcs12 = "P12"
    }

    /// PEM certificates trusted instead of the system store.
    public var caFile: CredentialFile?
    public var clientCertificateFile: CredentialFile?
    /// Not needed for PKCS#12, which carries the key, nor for a PEM certificate file that holds its key.
    public var clientKeyFile: CredentialFile?
    public var clientCertificateFormat: CertificateFormat
    /// Password of the client key or PKCS#12 file.
    public var clientKeyPassword: String?

    /// Options with files already read: a provider's, from its configuration.
    public init(
        caFile: CredentialFile?, clientCertificateFile: CredentialFile? = nil, clientKeyFile: CredentialFile? = nil,
        clientCertificateFormat: CertificateFormat = .pem, clientKeyPassword: String? = nil
    ) {
        self.caFile = caFile
        self.clientCertificateFile = clientCertificateFile
        self.clientKeyFile = clientKeyFile
        self.clientCertificateFormat = clientCertificateFormat
        self.clientKeyPassword = clientKeyPassword
    }

    /// Options that read the files at these paths now, once (tools and tests): what the paths hold later is not used.
    public init(
        caFile: String? = nil, clientCertificateFile: String? = nil, clientKeyFile: String? = nil,
        clientCertificateFormat: CertificateFormat = .pem, clientKeyPassword: String? = nil
    ) {
        self.init(
            caFile: caFile.map { CredentialFile(reading: $0) },
            clientCertificateFile: clientCertificateFile.map { CredentialFile(reading: $0) },
            clientKeyFile: clientKeyFile.map { CredentialFile(reading: $0) },
            clientCertificateFormat: clientCertificateFormat, clientKeyPassword: clientKeyPassword)
    }

    /// Why no TLS client context can be made of these options: a file refused, a CA bundle or certificate that does not
    /// parse, a key that does not parse, does not open with the password or does not match its certificate. nil when one
    /// can. Parses the bytes the connections will use, so a configuration checked with it cannot hand them a file that fails.
    public var problem: String? {
        do {
            _ = try NIOSSLContext(configuration: try clientConfiguration())
            return nil
        } catch let error as CredentialFileError {
            return "\(error)"
        } catch {
            return "\(fileNames) cannot make a TLS client context: \(error)"
        }
    }

    /// Why one of the files was refused when it was read, if one was.
    public var refusedFile: CredentialFileError? {
        [caFile, clientCertificateFile, clientKeyFile].lazy.compactMap { $0?.problem }.first
    }

    private var fileNames: String {
        [caFile, clientCertificateFile, clientKeyFile].compactMap { $0?.path }.joined(separator: ", ")
    }

    /// A client configuration made of the files' bytes, never of their paths: verification of the server always on,
    /// `h2` offered first.
    func clientConfiguration() throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = ["h2", "http/1.1"]
        tls.certificateVerification = .fullVerification
        if let caFile { tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(try caFile.bytes())) }
        guard let clientCertificateFile else { return tls }
        let certificate = try clientCertificateFile.bytes()
        let password = clientKeyPassword.map { Array($0.utf8) }
        switch clientCertificateFormat {
        case .pkcs12:
            let bundle = try NIOSSLPKCS12Bundle(buffer: certificate, passphrase: password)
            tls.certificateChain = bundle.certificateChain.map { .certificate($0) }
            tls.privateKey = .privateKey(bundle.privateKey)
        case .pem:
            tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(certificate).map { .certificate($0) }
            let key = try clientKeyFile?.bytes() ?? certificate
            if let password {
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: key, format: .pem) { $0(password) })
            } else {
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: key, format: .pem))
            }
        }
        return tls
    }
}

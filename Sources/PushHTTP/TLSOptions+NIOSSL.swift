import NIOSSL

/// What NIOSSL makes of the options' bytes: kept apart from `TLSOptions` so the plain value builds without a TLS stack
/// (the fuzzers compile it on its own).
extension TLSOptions {
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

    /// A client configuration made of the files' bytes, never of their paths: verification of the server always on,
    /// `h2` offered first unless the caller names its own protocols (none for Redis).
    package func clientConfiguration(applicationProtocols: [String] = ["h2", "http/1.1"]) throws -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.applicationProtocols = applicationProtocols
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

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

    /// Why one of the files was refused when it was read, if one was.
    public var refusedFile: CredentialFileError? {
        [caFile, clientCertificateFile, clientKeyFile].lazy.compactMap { $0?.problem }.first
    }

    var fileNames: String {
        [caFile, clientCertificateFile, clientKeyFile].compactMap { $0?.path }.joined(separator: ", ")
    }

}

extension TLSOptions {
    /// Whether `host` is an IPv4 or IPv6 literal: no SNI is sent for one, and its certificate must name the address.
    public static func isIPAddress(_ host: String) -> Bool {
        host.utf8.contains(UInt8(ascii: ":")) || host.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") }
    }
}

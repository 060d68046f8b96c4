import PushHTTP

/// TLS for `rediss://`: whom to trust, the client certificate for mutual TLS, and the name to verify. Verification of
/// the server, its host name included, is always on.
///
/// The files are read again for each new connection, so a CA bundle or client certificate rotated in place (a mounted
/// Secret) is used by the connections opened after it changed; connections already open keep theirs.
public struct RedisTLSSettings: Sendable, Equatable {
    /// PEM certificates trusted instead of the system store (`PUSH_REDIS_CA_FILE`).
    public var caFile: String?
    /// PEM client certificate (`PUSH_REDIS_CERT_FILE`), with `keyFile` (`PUSH_REDIS_KEY_FILE`).
    public var certificateFile: String?
    public var keyFile: String?
    /// The name every node's certificate must carry (`PUSH_REDIS_TLS_SERVER_NAME`), for clusters whose nodes announce
    /// IP addresses. Unset: the URL's host name, or the node's IP address, is verified.
    public var serverName: String?

    public init(caFile: String? = nil, certificateFile: String? = nil, keyFile: String? = nil, serverName: String? = nil) {
        self.caFile = caFile
        self.certificateFile = certificateFile
        self.keyFile = keyFile
        self.serverName = serverName
    }

    /// The name to verify for a node at `host`: the configured name, else `host` unless it is an IP literal (then the
    /// certificate must name that address).
    func nameToVerify(host: String) -> String? {
        if let serverName { return serverName }
        return TLSOptions.isIPAddress(host) ? nil : host
    }
}

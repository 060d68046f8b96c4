import NIOCore

/// The address a request is pinned to (`HTTPRequest.pinnedResolution`, `host:port:address` as libcurl's
/// `CURLOPT_RESOLVE` takes it), read for the HTTP/2 client. The connection goes to this address and nowhere else, with
/// no lookup of the name, so a name checked once cannot be re-pointed by DNS before the request (rebinding); TLS still
/// speaks to the URL's host: SNI names it and the certificate is verified against it (RFC 6125 §6), never against
/// the address, so a pinned request reaches the server the name denotes or fails.
struct PinnedAddress: Hashable, Sendable {
    /// The IP literal connected to, without brackets.
    let address: String
    let socketAddress: SocketAddress

    /// Nil unless `resolution` names exactly the target's host and port and an IPv4 or IPv6 literal: a pin for another
    /// host would otherwise be ignored and the name looked up after all.
    init?(_ resolution: String, for target: HTTPSTarget) {
        let bracketedHost = target.host.contains(":") ? "[\(target.host)]" : target.host
        let prefix = "\(bracketedHost):\(target.port):"
        // The target's host is lower-cased; the pin's may not be (host names compare without case, RFC 4343).
        guard String(decoding: resolution.utf8.prefix(prefix.utf8.count), as: UTF8.self).lowercased() == prefix else { return nil }
        var address = Substring(resolution.utf8.dropFirst(prefix.utf8.count))
        if address.hasPrefix("["), address.hasSuffix("]") { address = address.dropFirst().dropLast() }
        guard let socketAddress = try? SocketAddress(ipAddress: String(address), port: target.port) else { return nil }
        self.address = String(address)
        self.socketAddress = socketAddress
    }
}

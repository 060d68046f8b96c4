import Foundation

/// Subscription endpoints come from browsers through the upstream service: untrusted URLs.
/// Only https, no credentials, no loopback/private/link-local targets (by IP literal or by
/// any DNS answer) unless allowed, optionally only allow-listed hosts. The address checked
/// is the one connected to (pinned), so DNS cannot change it in between.
struct EndpointPolicy: Sendable {
    let allowPrivateNetworks: Bool
    let allowedHosts: [String]

    struct Target: Equatable {
        let origin: String
        let host: String
        let port: Int
        /// `host:port:address` for the transport, nil when no resolution was needed.
        let pinnedResolution: String?
    }

    func check(_ endpoint: String) async -> Result<Target, Refusal> {
        guard let components = URLComponents(string: endpoint), let scheme = components.scheme?.lowercased() else {
            return .failure(Refusal("endpoint is not a URL"))
        }
        guard scheme == "https" else { return .failure(Refusal("endpoint must be https, not \(scheme)")) }
        guard components.user == nil, components.password == nil else { return .failure(Refusal("endpoint must not carry credentials")) }
        guard let rawHost = components.host, !rawHost.isEmpty else { return .failure(Refusal("endpoint has no host")) }
        let host = rawHost.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        let port = components.port ?? 443
        if !allowedHosts.isEmpty, !allowedHosts.contains(where: { host == $0 || host.hasSuffix("." + $0) }) {
            return .failure(Refusal("endpoint host \(host) is not in PUSH_WEBPUSH_ALLOWED_HOSTS"))
        }
        let origin = "https://\(rawHost.lowercased())" + (components.port.map { ":\($0)" } ?? "")
        if let literal = IPAddress(host) {
            guard allowPrivateNetworks || literal.isPublic else {
                return .failure(Refusal("endpoint address \(host) is loopback, private or link-local"))
            }
            return .success(Target(origin: origin, host: host, port: port, pinnedResolution: nil))
        }
        let addresses = await Self.resolve(host)
        guard let first = addresses.first else { return .failure(Refusal("endpoint host \(host) does not resolve")) }
        if !allowPrivateNetworks, let blocked = addresses.first(where: { !$0.isPublic }) {
            return .failure(Refusal("endpoint host \(host) resolves to \(blocked.text), a loopback, private or link-local address"))
        }
        let pinned = first.isV6 ? "[\(first.text)]" : first.text
        return .success(Target(origin: origin, host: host, port: port, pinnedResolution: "\(host):\(port):\(pinned)"))
    }

    struct Refusal: Error, Equatable {
        let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// getaddrinfo on a background queue (it blocks).
    static func resolve(_ host: String) async -> [IPAddress] {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var hints = addrinfo()
                hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
                var result: UnsafeMutablePointer<addrinfo>?
                guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else {
                    continuation.resume(returning: [])
                    return
                }
                defer { freeaddrinfo(first) }
                var addresses: [IPAddress] = []
                var cursor: UnsafeMutablePointer<addrinfo>? = first
                while let entry = cursor {
                    if let address = entry.pointee.ai_addr.flatMap(IPAddress.init(socketAddress:)) { addresses.append(address) }
                    cursor = entry.pointee.ai_next
                }
                continuation.resume(returning: addresses)
            }
        }
    }
}

/// An IPv4 or IPv6 address and whether it is publicly routable.
struct IPAddress: Equatable, Sendable {
    let bytes: [UInt8]
    var isV6: Bool { bytes.count == 16 }

    init?(_ text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
        } else {
            return nil
        }
    }

    init?(socketAddress: UnsafeMutablePointer<sockaddr>) {
        switch Int32(socketAddress.pointee.sa_family) {
        case AF_INET:
            bytes = socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin_addr) { Array($0) }
            }
        case AF_INET6:
            bytes = socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin6_addr) { Array($0) }
            }
        default:
            return nil
        }
    }

    var text: String {
        var buffer = [CChar](repeating: 0, count: 64)
        _ = bytes.withUnsafeBytes { inet_ntop(isV6 ? AF_INET6 : AF_INET, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    var isPublic: Bool {
        if isV6 {
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return Self.v4IsPublic(Array(bytes[12..<16]))  // IPv4-mapped
            }
            if bytes.allSatisfy({ $0 == 0 }) { return false }                                   // ::
            if bytes[0..<15].allSatisfy({ $0 == 0 }), bytes[15] == 1 { return false }          // ::1
            if bytes[0] & 0xFE == 0xFC { return false }                                       // fc00::/7 unique local
            if bytes[0] == 0xFE, bytes[1] & 0xC0 == 0x80 { return false }                     // fe80::/10 link-local
            if bytes[0] == 0xFF { return false }                                              // multicast
            return true
        }
        return Self.v4IsPublic(bytes)
    }

    static func v4IsPublic(_ b: [UInt8]) -> Bool {
        switch (b[0], b[1]) {
        case (0, _), (10, _), (127, _): return false
        case (100, 64...127): return false            // carrier-grade NAT
        case (169, 254): return false                 // link-local, cloud metadata
        case (172, 16...31): return false
        case (192, 168): return false
        case (192, 0) where b[2] == 0: return false   // IETF protocol assignments
        case (198, 18...19): return false             // benchmarking
        case (224...255, _): return false             // multicast, reserved, broadcast
        default: return true
        }
    }
}

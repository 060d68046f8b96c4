import Foundation

/// An IPv4 or IPv6 address and whether a push service may live there.
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

    init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
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

    /// The IPv4 address an IPv6 one carries and reaches: IPv4-mapped `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2),
    /// IPv4-compatible `::a.b.c.d` (§2.5.5.1) and the NAT64 well-known prefix `64:ff9b::/96` (RFC 6052 §2.1).
    /// Those are judged by the IPv4 rules, so `[::ffff:10.0.0.1]` is as private as `10.0.0.1`.
    var embeddedIPv4: IPAddress? {
        guard isV6 else { return nil }
        let head = bytes[0..<12]
        let mapped = head.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
        let nat64 = head.elementsEqual([0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0])
        let compatible = head.allSatisfy { $0 == 0 } && bytes[12..<15].contains { $0 != 0 }
        guard mapped || nat64 || compatible else { return nil }
        return IPAddress(bytes: Array(bytes[12..<16]))
    }

    /// The IPv4 address an IPv6 one carries under one of a network's own NAT64 prefixes (RFC 6052 §2.2:
    /// `PUSH_WEBPUSH_NAT64_PREFIXES`), else as `embeddedIPv4` finds it.
    func embeddedIPv4(nat64 prefixes: [NAT64Prefix]) -> IPAddress? {
        if let known = embeddedIPv4 { return known }
        return prefixes.lazy.compactMap { $0.embeddedIPv4(in: self) }.first
    }

    /// What the rules judge: the embedded IPv4 address if there is one, else this one.
    var effective: IPAddress { embeddedIPv4 ?? self }

    func effective(nat64 prefixes: [NAT64Prefix]) -> IPAddress { embeddedIPv4(nat64: prefixes) ?? self }

    /// Globally reachable unicast, per the IANA special-purpose registries (RFC 6890 and its updates).
    var isPublic: Bool { isPublic(nat64: []) }

    /// As `isPublic`, an address under one of these NAT64 prefixes judged by the IPv4 address it embeds.
    func isPublic(nat64 prefixes: [NAT64Prefix]) -> Bool {
        let address = effective(nat64: prefixes)
        return address.isV6 ? Self.v6IsPublic(address.bytes) : Self.v4IsPublic(address.bytes)
    }

    static func v4IsPublic(_ b: [UInt8]) -> Bool {
        switch (b[0], b[1], b[2]) {
        case (0, _, _), (10, _, _), (127, _, _): return false  // "this network", private, loopback
        case (100, 64...127, _): return false  // carrier-grade NAT (RFC 6598)
        case (169, 254, _): return false  // link-local, cloud metadata
        case (172, 16...31, _): return false  // private
        case (192, 168, _): return false  // private
        case (192, 0, 0): return false  // IETF protocol assignments
        case (192, 0, 2), (198, 51, 100), (203, 0, 113): return false  // documentation (RFC 5737)
        case (192, 88, 99): return false  // 6to4 relay anycast (RFC 7526)
        case (198, 18...19, _): return false  // benchmarking
        case (224...255, _, _): return false  // multicast, reserved, broadcast
        default: return true
        }
    }

    static func v6IsPublic(_ b: [UInt8]) -> Bool {
        if b[0..<15].allSatisfy({ $0 == 0 }) { return false }  // ::, ::1
        if b[0] == 0x00, b[1] == 0x64, b[2] == 0xFF, b[3] == 0x9B, b[4] == 0x00, b[5] == 0x01 {
            return false  // 64:ff9b:1::/48 local-use NAT64 (RFC 8215)
        }
        if b[0] == 0x01, b[1] == 0x00, b[2..<8].allSatisfy({ $0 == 0 }) { return false }  // 100::/64 discard (RFC 6666)
        if b[0] == 0x20, b[1] == 0x01, b[2] == 0x00, b[3] == 0x00 { return false }  // 2001::/32 Teredo (RFC 4380)
        if b[0] == 0x20, b[1] == 0x01, b[2] == 0x0D, b[3] == 0xB8 { return false }  // 2001:db8::/32 documentation
        if b[0] == 0x20, b[1] == 0x02 { return false }  // 2002::/16 6to4 (RFC 3056, deprecated by RFC 7526)
        if b[0] & 0xFE == 0xFC { return false }  // fc00::/7 unique local
        if b[0] == 0xFE, b[1] & 0xC0 == 0x80 { return false }  // fe80::/10 link-local
        if b[0] == 0xFE, b[1] & 0xC0 == 0xC0 { return false }  // fec0::/10 site-local (RFC 3879)
        if b[0] == 0xFF { return false }  // multicast
        return true
    }
}

/// An address block in CIDR notation (`10.0.0.0/8`, `fd00::/8`), for `PUSH_WEBPUSH_ALLOWED_NETWORKS`.
public struct IPNetwork: Sendable, Equatable, CustomStringConvertible {
    let base: IPAddress
    let prefixLength: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let base = IPAddress(String(parts[0])) else { return nil }
        let bits = base.bytes.count * 8
        if parts.count == 2 {
            guard let length = Int(parts[1]), (0...bits).contains(length) else { return nil }
            prefixLength = length
        } else {
            prefixLength = bits
        }
        self.base = base
    }

    public var description: String { "\(base.text)/\(prefixLength)" }

    /// Whether the address (or the IPv4 address it embeds) lies in this block.
    func contains(_ address: IPAddress, nat64 prefixes: [NAT64Prefix] = []) -> Bool {
        let candidate = base.isV6 ? address : address.effective(nat64: prefixes)
        guard candidate.bytes.count == base.bytes.count else { return false }
        var remaining = prefixLength
        for (left, right) in zip(candidate.bytes, base.bytes) where remaining > 0 {
            let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
            guard left & mask == right & mask else { return false }
            remaining -= 8
        }
        return true
    }
}

/// A network's own NAT64 prefix (RFC 6052 §2.2), for `PUSH_WEBPUSH_NAT64_PREFIXES`: in an IPv6-only cluster
/// whose DNS64 synthesizes addresses under it, `2001:db8:64::10.0.0.1` reaches `10.0.0.1` and is judged as it.
/// The well-known `64:ff9b::/96` needs no setting.
public struct NAT64Prefix: Sendable, Equatable, CustomStringConvertible {
    let network: IPNetwork

    /// An IPv6 block of one of the lengths RFC 6052 §2.2 defines: 32, 40, 48, 56, 64 or 96.
    public init?(_ text: String) {
        guard let network = IPNetwork(text), network.base.isV6, [32, 40, 48, 56, 64, 96].contains(network.prefixLength) else {
            return nil
        }
        self.network = network
    }

    public var description: String { network.description }

    /// The IPv4 address `address` embeds under this prefix. Its 32 bits follow the prefix, skipping bits 64 to 71
    /// (octet 8, reserved; read whatever it holds, since a translator may ignore it).
    func embeddedIPv4(in address: IPAddress) -> IPAddress? {
        guard address.isV6, network.contains(address) else { return nil }
        let octets = (0..<16).filter { $0 >= network.prefixLength / 8 && $0 != 8 }.prefix(4).map { address.bytes[$0] }
        return IPAddress(bytes: Array(octets))
    }
}

import Dispatch
import Foundation

/// Arbitrary endpoint URLs and address texts through the Web Push endpoint policy (compiled
/// in from Plugins/WebPush). The system resolver is replaced by `getaddrinfo` below, which
/// answers every name with addresses from the input, so no DNS query leaves the machine
/// and the "resolves to a private address" branch is fuzzed too.
/// Invariants: without allowPrivateNetworks an accepted endpoint is public by its literal
/// or by every address it resolved to; an address embedding an IPv4 one (mapped
/// `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) is public only when
/// that IPv4 address is; an address's text parses back to the same address.
/// Input: flags, allowed hosts, up to 4 resolver answers (4 or 16 bytes each), the endpoint,
/// then an address text.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzEndpointPolicy(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    var input = FuzzInput(start, count)
    let flags = input.byte()
    let allowedHosts = (0..<(flags >> 1 & 3)).map { _ in input.string() }
    let policy = EndpointPolicy(
        EndpointPolicy.Rules(
            allowPrivateNetworks: flags & 1 == 1, allowedHosts: allowedHosts,
            allowedPorts: flags & 0x40 == 0 ? [443] : [443, 8443]))
    fakeAnswers = (0..<(flags >> 3 & 7) % 5).map { _ in Array((0..<(input.bool() ? 16 : 4)).map { _ in input.byte() }) }
    let endpoint = input.string()
    let text = input.string()

    if let address = IPAddress(text) { checkAddress(address) }
    for answer in fakeAnswers { checkAddress(IPAddress(bytes: answer)!) }

    let outcome = Box()
    let done = DispatchSemaphore(value: 0)
    Task {
        outcome.result = await policy.check(endpoint)
        done.signal()
    }
    done.wait()
    guard case .success(let target)? = outcome.result, !policy.rules.allowPrivateNetworks else { return 0 }
    if let literal = IPAddress(target.host) {
        precondition(literal.isPublic, "\(endpoint) accepted at private address \(target.host)")
    } else {
        precondition(target.pinnedResolution != nil, "\(endpoint) accepted without pinning its address")
        for answer in fakeAnswers {
            precondition(
                IPAddress(bytes: answer)!.isPublic,
                "\(endpoint) accepted though \(target.host) resolves to \(IPAddress(bytes: answer)!.text)")
        }
    }
    return 0
}

private final class Box: @unchecked Sendable {
    var result: Result<EndpointPolicy.Target, EndpointPolicy.Refusal>?
}

private func checkAddress(_ address: IPAddress) {
    let text = address.text
    precondition(IPAddress(text) == address, "\(address.bytes) prints as \(text), which parses to something else")
    guard address.isV6 else { return }
    let b = address.bytes
    let embedded = Array(b[12..<16])
    let mapped = b[0..<10].allSatisfy { $0 == 0 } && b[10] == 0xFF && b[11] == 0xFF
    let compatible = b[0..<12].allSatisfy { $0 == 0 } && !(b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] <= 1)
    let nat64 = b[0..<12] == [0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0]
    if mapped || compatible || nat64, !IPAddress.v4IsPublic(embedded) {
        precondition(
            !address.isPublic, "\(text) embeds the non-public \(embedded.map(String.init).joined(separator: ".")) but counts as public")
    }
}

/// The answers the fake resolver gives for the current input (inputs run one at a time).
nonisolated(unsafe) private var fakeAnswers: [[UInt8]] = []

/// Replaces libc's resolver in this binary: every name resolves to `fakeAnswers`.
@_cdecl("getaddrinfo")
public func fakeGetaddrinfo(
    _ node: UnsafePointer<CChar>?, _ service: UnsafePointer<CChar>?, _ hints: UnsafePointer<addrinfo>?,
    _ result: UnsafeMutablePointer<UnsafeMutablePointer<addrinfo>?>?
) -> Int32 {
    guard let result, !fakeAnswers.isEmpty else { return EAI_NONAME }
    var head: UnsafeMutablePointer<addrinfo>?
    for answer in fakeAnswers.reversed() {
        let entry = UnsafeMutablePointer<addrinfo>.allocate(capacity: 1)
        entry.initialize(to: addrinfo())
        if answer.count == 16 {
            let address = UnsafeMutablePointer<sockaddr_in6>.allocate(capacity: 1)
            address.initialize(to: sockaddr_in6())
            address.pointee.sin6_family = sa_family_t(AF_INET6)
            withUnsafeMutableBytes(of: &address.pointee.sin6_addr) { $0.copyBytes(from: answer) }
            entry.pointee.ai_family = AF_INET6
            entry.pointee.ai_addrlen = socklen_t(MemoryLayout<sockaddr_in6>.size)
            entry.pointee.ai_addr = UnsafeMutableRawPointer(address).assumingMemoryBound(to: sockaddr.self)
        } else {
            let address = UnsafeMutablePointer<sockaddr_in>.allocate(capacity: 1)
            address.initialize(to: sockaddr_in())
            address.pointee.sin_family = sa_family_t(AF_INET)
            withUnsafeMutableBytes(of: &address.pointee.sin_addr) { $0.copyBytes(from: answer) }
            entry.pointee.ai_family = AF_INET
            entry.pointee.ai_addrlen = socklen_t(MemoryLayout<sockaddr_in>.size)
            entry.pointee.ai_addr = UnsafeMutableRawPointer(address).assumingMemoryBound(to: sockaddr.self)
        }
        entry.pointee.ai_next = head
        head = entry
    }
    result.pointee = head
    return 0
}

@_cdecl("freeaddrinfo")
public func fakeFreeaddrinfo(_ list: UnsafeMutablePointer<addrinfo>?) {
    var cursor = list
    while let entry = cursor {
        cursor = entry.pointee.ai_next
        entry.pointee.ai_addr?.deallocate()
        entry.deallocate()
    }
}

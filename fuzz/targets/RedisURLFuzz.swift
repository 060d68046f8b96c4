import PushRedis

/// Any text as PUSH_REDIS_URL: parsing never traps; a parsed URL has a host, a TCP port and
/// a database number ≥ 0, and its description (logged) does not depend on the password.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRedisURL(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeRawBufferPointer(start: start, count: count), as: UTF8.self)
    _ = RedisURL.masked(text)
    guard let url = RedisURL(text) else { return 0 }
    precondition(!url.host.isEmpty && (1...65535).contains(url.port) && url.database >= 0, "\(url)")
    if url.password != nil {
        var other = url
        other.password = "other"
        precondition(other.description == url.description, "description depends on the password")
    }
    return 0
}

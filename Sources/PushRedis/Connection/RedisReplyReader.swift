import CHiredis

/// hiredis' RESP reader (`redisReader*`): bytes in as they arrive, whole replies out. The one owner of its C handle;
/// used on one event loop.
final class RedisReplyReader {
    private let reader: UnsafeMutablePointer<redisReader>

    init() {
        guard let reader = redisReaderCreate() else { fatalError("hiredis could not allocate a reply reader") }
        self.reader = reader
    }

    deinit { redisReaderFree(reader) }

    /// Takes bytes read from the connection.
    func feed(_ bytes: UnsafeRawBufferPointer) throws(RedisError) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        guard redisReaderFeed(reader, base.assumingMemoryBound(to: CChar.self), bytes.count) == REDIS_OK else {
            throw .unavailable("reading a reply: \(errorText)")
        }
    }

    /// The next whole reply, or nil until more bytes arrive. A protocol error (the server does not speak RESP) throws.
    func next() throws(RedisError) -> RedisValue? {
        var reply: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &reply) == REDIS_OK else {
            throw .unavailable("the server's answer is not a Redis reply (\(errorText))")
        }
        guard let reply else { return nil }
        defer { freeReplyObject(reply) }
        return Self.value(of: reply.assumingMemoryBound(to: redisReply.self))
    }

    private var errorText: String {
        withUnsafeBytes(of: reader.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }

    private static func value(of reply: UnsafeMutablePointer<redisReply>) -> RedisValue {
        let raw = reply.pointee
        switch raw.type {
        case REDIS_REPLY_STRING:
            return .bulk(raw.str.map { Array(UnsafeRawBufferPointer(start: $0, count: raw.len)) } ?? [])
        case REDIS_REPLY_STATUS:
            return .status(raw.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: raw.len), as: UTF8.self) } ?? "")
        case REDIS_REPLY_ERROR:
            return .error(raw.str.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: raw.len), as: UTF8.self) } ?? "")
        case REDIS_REPLY_INTEGER:
            return .integer(raw.integer)
        case REDIS_REPLY_ARRAY:
            return .array((0..<raw.elements).map { value(of: raw.element[$0]!) })
        default:
            return .null
        }
    }
}

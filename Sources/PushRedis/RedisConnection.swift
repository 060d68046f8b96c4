import CHiredis
import Foundation

/// Owns one blocking hiredis context. Used by one thread at a time (its pool slot's queue).
final class RedisConnection: @unchecked Sendable {
    private var context: UnsafeMutablePointer<redisContext>?
    private let url: RedisURL
    private let connectTimeout: Duration
    private let commandTimeout: Duration

    init(url: RedisURL, connectTimeout: Duration, commandTimeout: Duration) {
        self.url = url
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
    }

    deinit { if let context { redisFree(context) } }

    /// Sends all commands, then reads all replies (one round trip). Reconnects first if needed.
    func pipeline(_ commands: [RedisCommand]) throws(RedisError) -> [RedisValue] {
        let context = try connected()
        let request = RedisProtocol.request(commands)
        let status = request.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { redisAppendFormattedCommand(context, $0.baseAddress, $0.count) }
        }
        guard status == REDIS_OK else { throw fail(context, "append") }
        var replies: [RedisValue] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            var reply: UnsafeMutableRawPointer?
            guard redisGetReply(context, &reply) == REDIS_OK, let reply else { throw fail(context, "read") }
            replies.append(Self.value(of: reply.assumingMemoryBound(to: redisReply.self)))
            freeReplyObject(reply)
        }
        return replies
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

    private func connected() throws(RedisError) -> UnsafeMutablePointer<redisContext> {
        if let context { return context }
        let context = redisConnectWithTimeout(url.host, Int32(url.port), Self.timeval(connectTimeout))
        guard let context else { throw .unavailable("cannot allocate a connection") }
        guard context.pointee.err == 0 else {
            let detail = Self.errorText(context)
            redisFree(context)
            throw .unavailable("connect to \(url.host):\(url.port): \(detail)")
        }
        redisSetTimeout(context, Self.timeval(commandTimeout))
        redisEnableKeepAlive(context)
        self.context = context
        var setup: [RedisCommand] = []
        if let password = url.password {
            setup.append(url.username.map { RedisCommand("AUTH", $0, password) } ?? RedisCommand("AUTH", password))
        }
        if url.database != 0 { setup.append(RedisCommand("SELECT", String(url.database))) }
        if !setup.isEmpty {
            let replies = try pipeline(setup)
            if case .error(let message)? = replies.first(where: { if case .error = $0 { true } else { false } }) {
                disconnect()
                throw .unavailable("\(RedisError.setupRefused): \(message)")
            }
        }
        return context
    }

    private func fail(_ context: UnsafeMutablePointer<redisContext>, _ operation: String) -> RedisError {
        let detail = Self.errorText(context)
        disconnect()
        return .unavailable("\(operation): \(detail)")
    }

    func disconnect() {
        if let context { redisFree(context) }
        context = nil
    }

    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        withUnsafeBytes(of: context.pointee.errstr) { buffer in
            String(decoding: buffer.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    private static func timeval(_ duration: Duration) -> Foundation.timeval {
        let (seconds, attoseconds) = duration.components
        return Foundation.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }
}

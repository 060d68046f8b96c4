/// Whether the user of `PUSH_REDIS_URL` may run every command the stores send, scripts' commands included (Redis
/// checks a script's calls against the user's ACL too): each is tried in a form that changes nothing (on keys of its
/// own that do not exist, an unknown script), and a `NOPERM` answer names the command. Anything else, an error
/// included, means the ACL let it through.
extension RedisClient {
    /// The commands the stores need that the server refuses this user (`NOPERM`), lower-case, in the order tried.
    public func deniedCommands() async throws(RedisError) -> [String] {
        let key = "push:{permission-probe}k"
        let other = "push:{permission-probe}o"
        var probes: [(String, RedisCommand)] = [
            ("get", RedisCommand("GET", key)), ("set", RedisCommand("SET", key, "v", "NX", "GET", "PX", "1")),
            ("del", RedisCommand("DEL", other)), ("exists", RedisCommand("EXISTS", key)),
            ("hgetall", RedisCommand("HGETALL", key)), ("pexpire", RedisCommand("PEXPIRE", other, "1")),
            ("zcard", RedisCommand("ZCARD", key)), ("zrem", RedisCommand("ZREM", other, "m")),
            ("rename", RedisCommand("RENAME", other, key)), ("script", RedisCommand("SCRIPT", "EXISTS", String(repeating: "0", count: 40))),
            ("evalsha", RedisCommand("EVALSHA", String(repeating: "0", count: 40), "0")),
            ("eval", RedisCommand("EVAL", "return 1", "0")), ("info", RedisCommand("INFO", "replication")),
            ("wait", RedisCommand("WAIT", "0", "0")), ("ping", RedisCommand("PING")),
        ]
        // Called from the stores' scripts.
        let scripted: [(String, String)] = [
            ("hget", "redis.call('HGET', KEYS[1], 'f')"), ("hset", "redis.call('HSET', KEYS[2], 'f', 'v')"),
            ("hincrby", "redis.call('HINCRBY', KEYS[2], 'f', 0)"), ("incr", "redis.call('INCRBY', KEYS[2], 0)"),
            ("time", "redis.call('TIME')"), ("zadd", "redis.call('ZADD', KEYS[2], 'XX', 0, 'm')"),
            ("zcount", "redis.call('ZCOUNT', KEYS[1], 0, 0)"), ("zrangebyscore", "redis.call('ZRANGEBYSCORE', KEYS[1], 0, 0)"),
            ("zscore", "redis.call('ZSCORE', KEYS[1], 'm')"), ("exists", "redis.call('EXISTS', KEYS[1])"),
            ("pexpire", "redis.call('PEXPIRE', KEYS[2], 1)"), ("del", "redis.call('DEL', KEYS[2])"),
        ]
        for (name, call) in scripted {
            probes.append(("\(name) (in a script)", RedisCommand("EVAL", "\(call) return 1", "2", key, other)))
        }
        let replies = try await pipeline(probes.map(\.1))
        var denied: [String] = []
        for ((name, _), reply) in zip(probes, replies) {
            if case .error(let message) = reply, Self.meansDenied(message) { denied.append(name) }
        }
        return denied
    }

    /// `NOPERM` for a command sent; in a script, Redis 7.0 says "The user executing the script can't run this command".
    static func meansDenied(_ message: String) -> Bool {
        message.hasPrefix("NOPERM") || message.contains("user executing the script can't run")
    }
}

import PushPluginAPI
import PushRedis

extension ConfigurationCheck {
    /// `redis auth` (the URL's user and password accepted; over TLS for `rediss://`, the server verified), `redis ping`,
    /// `redis acl` (every command the worker sends allowed), `redis version` (at least 7.0); one line when
    /// Redis is not configured or cannot be reached. Through the worker's own client (`RedisClient`), which sends `AUTH`
    /// on each new connection.
    static func redisChecks(_ configuration: WorkerConfiguration, timeout: Duration) async -> [CheckResult] {
        guard let url = configuration.redisURL else {
            return [.ok("redis", "not configured (PUSH_REDIS_URL unset): dedupe, idempotency and retries live in each process")]
        }
        let client = RedisClient(
            url: url, connections: 1, connectTimeout: timeout, commandTimeout: timeout, tls: configuration.redisTLS)
        let user = url.username ?? "default"
        let pong: RedisValue
        do {
            pong = try await client.command(RedisCommand("PING"))
        } catch {
            if error.refusedConnectionSetup { return [.fail("redis auth", "\(url): refused for user \(user): \(error)")] }
            return [.fail("redis", "\(url): \(error)")]
        }
        var results: [CheckResult] = [
            url.password == nil
                ? .ok("redis auth", "\(url): no password in PUSH_REDIS_URL, none sent")
                : .ok("redis auth", "\(url): accepted for user \(user)"),
            .ok("redis ping", pong.string ?? "answered"),
        ]
        do {
            let denied = try await client.deniedCommands()
            results.append(
                denied.isEmpty
                    ? .ok("redis acl", "user \(user) may run every command the worker sends")
                    : .fail(
                        "redis acl",
                        "user \(user) may not run \(denied.joined(separator: ", ")) (NOPERM): grant them in its ACL (docs/operations.md lists them)"
                    ))
        } catch {
            results.append(.fail("redis acl", "\(error)"))
        }
        do {
            let info = try await client.command(RedisCommand("INFO", "server"))
            results.append(versionCheck(info.string ?? ""))
        } catch {
            results.append(.fail("redis version", "INFO server: \(error)"))
        }
        return results
    }

    /// The dedupe claim is `SET … NX GET`, which Redis takes from 7.0.
    static func versionCheck(_ info: String) -> CheckResult {
        guard let version = RedisServerVersion(info: info) else { return .fail("redis version", "INFO server names no redis_version") }
        guard version >= RedisServerVersion.minimum else {
            return .fail(
                "redis version", "\(version) is older than \(RedisServerVersion.minimum): the dedupe claim needs SET … NX GET (Redis 7.0)")
        }
        return .ok("redis version", "\(version) (at least \(RedisServerVersion.minimum), for SET … NX GET)")
    }
}

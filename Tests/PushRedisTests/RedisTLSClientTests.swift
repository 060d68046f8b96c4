import Foundation
import PushCore
import PushSandbox
import Testing
import TestSupport
@testable import PushRedis

/// The client against real TLS-only redis-servers with ACL users (the `default` user off), one node and a 3-master
/// cluster with `tls-cluster yes`, certificates from the test's own CA.
@Suite("rediss://: TLS and ACL users against real redis-servers", .enabled(if: RedisServerProcess.isInstalled))
struct RedisTLSClientTests {
    @Test("rediss:// URLs: TLS on, every other part as redis://; the description keeps the scheme and masks the password")
    func urls() throws {
        let url = try #require(RedisURL("rediss://worker:s3cret@cache.example.com:6380,10.0.0.2:6380/0"))
        #expect(url.usesTLS)
        #expect(url.username == "worker" && url.password == "s3cret")
        #expect(url.seeds.map(\.port) == [6380, 6380])
        #expect(url.description == "rediss://worker:***@cache.example.com:6380,10.0.0.2:6380/0")
        #expect(try #require(RedisURL("redis://127.0.0.1")).usesTLS == false)
        #expect(RedisURL("redisss://x") == nil)
        #expect(RedisURL("rediss:/x") == nil)
    }

    @Test(
        "over TLS with an ACL user, pipelines, scripts and the stores work as on plain Redis, on one node and on a cluster",
        arguments: RedisTLSDeployment.allCases)
    func storesOverTLS(_ deployment: RedisTLSDeployment) async throws {
        let redis = try await deployment.start()
        defer { redis.stop() }
        let client = redis.tlsClient()
        let replies = try await client.pipeline(
            (0..<200).map { RedisCommand("SET", "tls\($0)", "v\($0)", "PX", "10000") } + [RedisCommand("GET", "tls7")])
        #expect(replies.count == 201 && replies[200].string == "v7")
        let script = RedisScript("return redis.call('INCR', KEYS[1])")
        #expect(try await client.evaluate(script, keys: ["{s}n"], arguments: []) == .integer(1))
        #expect(try await client.evaluate(script, keys: ["{s}n"], arguments: []) == .integer(2))
        let store = RedisDeliveryStore(client: client, recordRetention: .seconds(60))
        #expect(try await store.prepare(RedisDeliveryStoreTests.job("j1"), dedupeWindow: 60_000) == [.fresh])
        #expect(try await store.prepare(RedisDeliveryStoreTests.job("j2"), dedupeWindow: 60_000) == [.duplicate(ofJob: "j1")])
        #expect(await client.ping())
        if deployment == .cluster { #expect(client.isCluster == true && client.clusterMasters.count == 3) }
    }

    @Test("mutual TLS: a server that requires client certificates takes the configured one and refuses a client without")
    func mutualTLS() async throws {
        let redis = try await RedisTLSDeployment.single.start(clientCertificates: .required)
        defer { redis.stop() }
        #expect(await redis.tlsClient(clientCertificate: true).ping())
        let error = await unavailableError { try await redis.tlsClient(clientCertificate: false).command(RedisCommand("PING")) }
        #expect(error != nil)
    }

    @Test("a server whose certificate the CA file does not vouch for is refused, with the reason and what to check")
    func unverifiableCertificate() async throws {
        let redis = try await RedisTLSDeployment.single.start()
        defer { redis.stop() }
        let material = try #require(redis.tlsMaterial)
        let client = redis.tlsClient(caFile: material.unrelatedCAFile)
        let error = try #require(await unavailableError { try await client.command(RedisCommand("PING")) })
        #expect(error.contains("cannot be verified") && error.contains("PUSH_REDIS_CA_FILE"), "\(error)")
    }

    @Test(
        "the host name is always verified: a certificate for another name is refused at an IP address, and taken with PUSH_REDIS_TLS_SERVER_NAME naming it",
        arguments: RedisTLSDeployment.allCases)
    func serverName(_ deployment: RedisTLSDeployment) async throws {
        let redis = try await deployment.start(serverCertificate: .serverNameOnly)
        defer { redis.stop() }
        let unnamed = redis.tlsClient()
        #expect(await unavailableError { try await unnamed.command(RedisCommand("PING")) } != nil)
        let named = redis.tlsClient(serverName: redis.serverName)
        #expect(await named.ping())
        if deployment == .cluster {
            // The nodes announce 127.0.0.1 in CLUSTER SLOTS: every master is verified against the configured name.
            let replies = try await named.pipeline((0..<64).map { RedisCommand("SET", "spread\($0)", "x") })
            #expect(replies.allSatisfy { $0 == .status("OK") })
            #expect(named.clusterMasters.count == 3)
        }
    }

    @Test("a plain-text server behind rediss:// is refused, the error saying it does not speak TLS")
    func plainServerBehindRediss() async throws {
        let plain = try await RedisServerProcess.launch()
        defer { plain.stop() }
        let client = RedisClient(
            url: RedisURL("rediss://127.0.0.1:\(plain.port)/0")!, connections: 1, connectTimeout: .seconds(2),
            commandTimeout: .seconds(5))
        let error = try #require(await unavailableError { try await client.command(RedisCommand("PING")) })
        #expect(error.contains("does not speak TLS"), "\(error)")
    }

    @Test("a refused password is WRONGPASS from the connection's setup: named, the URL masked, never retried as another user")
    func wrongPassword() async throws {
        let redis = try await RedisTLSDeployment.single.start()
        defer { redis.stop() }
        var url = redis.url
        url.password = "not-the-password"
        let client = RedisClient(url: url, connections: 1, tls: redis.tlsSettings())
        do {
            _ = try await client.command(RedisCommand("PING"))
            Issue.record("a wrong password was accepted")
        } catch {
            #expect(error.refusedConnectionSetup)
            #expect("\(error)".contains("WRONGPASS") && "\(error)".contains("PUSH_REDIS_URL"), "\(error)")
            #expect(!"\(error)".contains("not-the-password"))
        }
    }

    @Test("an ACL without a command the worker needs answers NOPERM naming it; the error says the user's ACL lacks it")
    func missingPermission() async throws {
        let redis = try await RedisTLSDeployment.single.start(deniedCommands: ["set"])
        defer { redis.stop() }
        let client = redis.tlsClient()
        do {
            _ = try await RedisDeliveryStore(client: client, recordRetention: .seconds(60)).prepare(
                RedisDeliveryStoreTests.job("noperm"), dedupeWindow: 1_000)
            Issue.record("a dedupe claim ran without SET")
        } catch {
            #expect("\(error)".contains("NOPERM") && "\(error)".lowercased().contains("'set'"), "\(error)")
            #expect("\(error)".contains("PUSH_REDIS_URL"), "\(error)")
        }
    }

    @Test("the CA file is read again for each new connection: a bundle fixed in place is used without a new client")
    func caFileReloaded() async throws {
        let redis = try await RedisTLSDeployment.single.start()
        defer { redis.stop() }
        let material = try #require(redis.tlsMaterial)
        let caFile = material.directory.appendingPathComponent("rotating-ca.pem").path
        try FileManager.default.copyItem(atPath: material.unrelatedCAFile, toPath: caFile)
        let client = redis.tlsClient(caFile: caFile)
        #expect(await unavailableError { try await client.command(RedisCommand("PING")) } != nil)
        try FileManager.default.removeItem(atPath: caFile)
        try FileManager.default.copyItem(atPath: material.caFile, toPath: caFile)
        #expect(await client.ping())
    }

    /// The `.unavailable` text of what `body` threw; nil when it did not throw (another error is recorded).
    private func unavailableError(_ body: () async throws -> RedisValue) async -> String? {
        do {
            _ = try await body()
            return nil
        } catch {
            guard case .unavailable? = error as? RedisError else {
                Issue.record("expected unavailable, got \(error)")
                return nil
            }
            return "\(error)"
        }
    }
}

extension RunningRedis {
    /// The TLS settings a worker would be given for this deployment: its CA (or `caFile`), its client certificate, and a
    /// name to verify.
    func tlsSettings(caFile: String? = nil, clientCertificate: Bool = true, serverName: String? = nil) -> RedisTLSSettings {
        RedisTLSSettings(
            caFile: caFile ?? tlsMaterial?.caFile, certificateFile: clientCertificate ? tlsMaterial?.clientCertFile : nil,
            keyFile: clientCertificate ? tlsMaterial?.clientKeyFile : nil, serverName: serverName)
    }

    func tlsClient(caFile: String? = nil, clientCertificate: Bool = true, serverName: String? = nil) -> RedisClient {
        RedisClient(
            url: url, connections: 2, connectTimeout: .seconds(2), commandTimeout: .seconds(5),
            tls: tlsSettings(caFile: caFile, clientCertificate: clientCertificate, serverName: serverName))
    }
}

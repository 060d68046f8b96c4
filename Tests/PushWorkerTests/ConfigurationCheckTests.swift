import FCMSandbox
import Foundation
import HMSSandbox
import PushCore
import PushCrypto
import PushPluginAPI
import PushRedis
import PushSandbox
import Testing
import TestSupport

@testable import PushWorker

/// `check-config` against the mock cluster, a real redis-server and the provider sandboxes.
@Suite("check-config meets what start-up meets")
struct ConfigurationCheckTests {
    /// A worker environment on `kafka`, the APNs sandbox and (when given) the FCM sandbox and Redis.
    static func environment(
        kafka: KafkaFixture, apns: APNsSandboxFixture, fcm: FCMSandboxInstance? = nil, redis: RedisServerProcess? = nil
    ) -> [String: String] {
        var environment = OperatorCommandTests.environment(apns: apns, fcm: fcm)
        environment["PUSH_KAFKA_BROKERS"] = kafka.cluster.bootstrapServers
        environment["PUSH_REDIS_URL"] = redis?.urlString
        return environment
    }

    static func result(_ report: ConfigurationCheck.Report, _ check: String) -> CheckResult? {
        report.results.first { $0.check == check }
    }

    @Test(
        "a configuration start-up accepts passes every check: topics with partitions, both groups, Redis AUTH and ACL, APNs token, FCM token"
    )
    func everythingPasses() async throws {
        let kafka = try KafkaFixture(partitions: 4)
        let apns = try await APNsSandboxFixture.start()
        let fcm = try await FCMSandboxInstance.start(tls: apns.tls)
        let redis = try await RedisServerProcess.launch(password: "s3cret-pw")
        let report = await ConfigurationCheck.run(
            environment: Self.environment(kafka: kafka, apns: apns, fcm: fcm, redis: redis), options: .init(timeout: .seconds(10)))
        #expect(report.exitStatus == 0, "\(report.lines)")
        #expect(
            report.results.map(\.check) == [
                "configuration", "kafka metadata", "kafka topic jobs", "kafka topic urgent", "kafka topic outcomes",
                "kafka topic dead letters", "kafka group push-worker", "kafka group push-worker.urgent", "redis auth", "redis ping",
                "redis acl", "redis version", "apns com.example.chat", "fcm example-project",
            ])
        #expect(Self.result(report, "kafka topic jobs")?.detail == "push.jobs: 4 partitions")
        #expect(Self.result(report, "kafka topic dead letters")?.detail == "push.dlq: 1 partition")
        #expect(Self.result(report, "kafka group push-worker.urgent")?.detail == "committed offsets readable on push.jobs.urgent: none yet")
        #expect(Self.result(report, "redis version")?.detail.hasPrefix("7.") == true)
        #expect(!report.lines.joined().contains("s3cret-pw"), "the Redis password is masked")
        #expect(apns.server.requests.isEmpty, "without --probe-providers nothing is sent to APNs")
        #expect(fcm.sandbox.tokenRequestCount == 1, "the FCM access token was minted")
        await fcm.server.stop()
        await apns.stop()
    }

    @Test("a missing topic fails its check and names the topic; the others pass")
    func missingTopic() async throws {
        let kafka = try KafkaFixture()
        let apns = try await APNsSandboxFixture.start()
        var environment = Self.environment(kafka: kafka, apns: apns)
        environment["PUSH_DLQ_TOPIC"] = "push.dlq.missing"
        let report = await ConfigurationCheck.run(environment: environment, options: .init(timeout: .seconds(10)))
        #expect(report.exitStatus == 1)
        #expect(report.failures == [.fail("kafka topic dead letters", "push.dlq.missing does not exist")], "\(report.lines)")
        await apns.stop()
    }

    @Test("the PUSH_RDKAFKA_* security settings are used: TLS to a plaintext broker fails the metadata check")
    func kafkaSecuritySettings() async throws {
        let kafka = try KafkaFixture()
        let apns = try await APNsSandboxFixture.start()
        var environment = Self.environment(kafka: kafka, apns: apns)
        environment["PUSH_RDKAFKA_SECURITY_PROTOCOL"] = "ssl"
        environment["PUSH_RDKAFKA_SSL_CA_LOCATION"] = apns.tls.caFile
        let report = await ConfigurationCheck.run(environment: environment, options: .init(timeout: .seconds(4)))
        #expect(report.exitStatus == 1)
        let metadata = try #require(Self.result(report, "kafka metadata"))
        #expect(!metadata.passed)
        #expect(metadata.detail.contains("security.protocol ssl"), "\(metadata)")
        #expect(Self.result(report, "kafka topic jobs") == nil, "no topic checks without metadata")
        await apns.stop()
    }

    @Test("a group whose committed offsets the broker refuses to show (authorization) fails; no offsets yet passes")
    func groupAuthorization() async throws {
        let kafka = try KafkaFixture()
        let apns = try await APNsSandboxFixture.start()
        // OffsetFetch (API key 9) answered GROUP_AUTHORIZATION_FAILED (30).
        kafka.cluster.failNextRequests(apiKey: 9, count: 20, error: 30)
        let report = await ConfigurationCheck.run(
            environment: Self.environment(kafka: kafka, apns: apns), options: .init(timeout: .seconds(10)))
        #expect(report.exitStatus == 1)
        let group = try #require(Self.result(report, "kafka group push-worker"))
        #expect(!group.passed && group.detail.contains("uthoriz"), "\(group)")
        kafka.cluster.clearRequestErrors(apiKey: 9)
        let again = await ConfigurationCheck.run(
            environment: Self.environment(kafka: kafka, apns: apns), options: .init(timeout: .seconds(10)))
        #expect(Self.result(again, "kafka group push-worker")?.detail == "committed offsets readable on push.jobs: none yet")
        await apns.stop()
    }

    @Test("a wrong Redis password fails AUTH and names the user, never the password")
    func wrongRedisPassword() async throws {
        let kafka = try KafkaFixture()
        let apns = try await APNsSandboxFixture.start()
        let redis = try await RedisServerProcess.launch(password: "right-pw")
        var environment = Self.environment(kafka: kafka, apns: apns)
        environment["PUSH_REDIS_URL"] = "redis://:wrong-pw@127.0.0.1:\(redis.port)/0"
        let report = await ConfigurationCheck.run(environment: environment, options: .init(timeout: .seconds(10)))
        #expect(report.exitStatus == 1)
        let auth = try #require(Self.result(report, "redis auth"))
        #expect(!auth.passed)
        #expect(auth.detail.contains("WRONGPASS") && auth.detail.contains("user default"), "\(auth)")
        #expect(!report.lines.joined().contains("wrong-pw") && !report.lines.joined().contains("right-pw"))
        #expect(Self.result(report, "redis version") == nil)
        await apns.stop()
    }

    @Test(
        "over rediss:// check-config verifies the server with PUSH_REDIS_CA_FILE, authenticates the ACL user and names every command its ACL denies"
    )
    func redisOverTLS() async throws {
        let kafka = try KafkaFixture()
        let apns = try await APNsSandboxFixture.start()
        let redis = try await RedisTLSDeployment.single.start(deniedCommands: ["wait", "zadd"])
        defer { redis.stop() }
        let material = try #require(redis.tlsMaterial)
        var environment = Self.environment(kafka: kafka, apns: apns)
        environment["PUSH_REDIS_URL"] = redis.urlString
        environment["PUSH_REDIS_CA_FILE"] = material.caFile
        let report = await ConfigurationCheck.run(environment: environment, options: .init(timeout: .seconds(10)))
        #expect(try #require(Self.result(report, "redis auth")).detail.contains("accepted for user worker"))
        #expect(try #require(Self.result(report, "redis ping")).passed)
        let acl = try #require(Self.result(report, "redis acl"))
        #expect(!acl.passed && acl.detail.contains("may not run wait, zadd (in a script) (NOPERM)"), "\(acl)")
        #expect(report.exitStatus == 1)
        #expect(!report.lines.joined().contains(try #require(redis.acl).password))

        environment["PUSH_REDIS_CA_FILE"] = material.unrelatedCAFile
        let unverified = await ConfigurationCheck.run(environment: environment, options: .init(timeout: .seconds(10)))
        let failure = try #require(Self.result(unverified, "redis"))
        #expect(!failure.passed && failure.detail.contains("cannot be verified"), "\(failure)")
        await apns.stop()
    }

    @Test("a Redis that reports version 6.2 fails: the dedupe claim needs SET … NX GET from 7.0")
    func redisVersion() {
        let old = ConfigurationCheck.versionCheck("# Server\r\nredis_version:6.2.14\r\nredis_mode:standalone\r\n")
        #expect(!old.passed)
        #expect(old.detail == "6.2.14 is older than 7.0.0: the dedupe claim needs SET … NX GET (Redis 7.0)")
        #expect(ConfigurationCheck.versionCheck("redis_version:7.0.15\r\n").passed)
        #expect(ConfigurationCheck.versionCheck("redis_version:7.2\r\n").passed)
        #expect(!ConfigurationCheck.versionCheck("redis_mode:standalone\r\n").passed, "no version: fails")
        #expect(RedisServerVersion("6.2.14")! < RedisServerVersion.minimum)
        #expect(RedisServerVersion("10.0.1")! > RedisServerVersion("7.4.2")!)
        #expect(RedisServerVersion("seven") == nil)
    }

    @Test("an FCM key the token endpoint refuses fails")
    func revokedFCMKey() async throws {
        let kafka = try KafkaFixture()
        let apns = try await APNsSandboxFixture.start()
        let fcm = try await FCMSandboxInstance.start(tls: apns.tls)
        // The same service account with a key the sandbox does not know: a revoked (or deleted) key.
        var account = JSONWriter()
        account.beginObject()
        account.member("type", "service_account")
        account.member("project_id", FCMSandboxInstance.projectId)
        account.member("private_key_id", "revoked-key-1")
        account.member("private_key", try PrivateKey.generateRSA().pem())
        account.member("client_email", FCMSandboxInstance.clientEmail)
        account.member("token_uri", fcm.server.baseURL + "/token")
        account.endObject()
        try account.string.write(toFile: fcm.credentialsFile, atomically: true, encoding: .utf8)
        let report = await ConfigurationCheck.run(
            environment: Self.environment(kafka: kafka, apns: apns, fcm: fcm), options: .init(timeout: .seconds(10)))
        #expect(report.exitStatus == 1)
        let check = try #require(Self.result(report, "fcm example-project"))
        #expect(!check.passed)
        #expect(check.detail.contains("refused the grant") && check.detail.contains("invalid_grant"), "\(check)")
        await fcm.server.stop()
        await apns.stop()
    }

    @Test("an HMS app's client secret mints a token and --probe-providers sends one validate-only message; a wrong secret fails")
    func hmsCredentials() async throws {
        let kafka = try KafkaFixture()
        let apns = try await APNsSandboxFixture.start()
        let hms = try await HMSSandboxInstance.start(tls: apns.tls)
        var environment = Self.environment(kafka: kafka, apns: apns).merging(hms.workerEnvironment) { $1 }
        environment["PUSH_HMS_CA_FILE"] = apns.tls.caFile
        let accepted = await ConfigurationCheck.run(environment: environment, options: .init(timeout: .seconds(10), probesProviders: true))
        #expect(Self.result(accepted, "hms \(HMSSandboxInstance.appId)")?.passed == true, "\(accepted.lines)")
        #expect(Self.result(accepted, "hms \(HMSSandboxInstance.appId) probe")?.passed == true, "\(accepted.lines)")
        #expect(hms.sendRequests.count == 1)
        try "not-the-secret\n".write(toFile: hms.clientSecretFile, atomically: true, encoding: .utf8)
        let refused = await ConfigurationCheck.run(environment: environment, options: .init(timeout: .seconds(10), probesProviders: true))
        #expect(refused.exitStatus == 1)
        let check = try #require(Self.result(refused, "hms \(HMSSandboxInstance.appId)"))
        #expect(!check.passed)
        #expect(!refused.lines.joined().contains("not-the-secret"), "the secret never appears")
        #expect(Self.result(refused, "hms \(HMSSandboxInstance.appId) probe") == nil, "no probe without a token")
        await hms.server.stop()
        await apns.stop()
    }

    @Test("--probe-providers sends one APNs request and a refused provider token fails")
    func probeAPNs() async throws {
        let kafka = try KafkaFixture()
        let apns = try await APNsSandboxFixture.start()
        let fcm = try await FCMSandboxInstance.start(tls: apns.tls)
        let options = ConfigurationCheck.Options(timeout: .seconds(10), probesProviders: true)
        let accepted = await ConfigurationCheck.run(environment: Self.environment(kafka: kafka, apns: apns, fcm: fcm), options: options)
        #expect(accepted.exitStatus == 0, "\(accepted.lines)")
        #expect(apns.server.requests.count == 1)
        let probe = try #require(Self.result(accepted, "apns com.example.chat probe"))
        #expect(probe.detail.contains("credential and topic accepted (HTTP 400 BadDeviceToken"), "\(probe)")
        #expect(Self.result(accepted, "fcm example-project probe")?.passed == true)

        var environment = Self.environment(kafka: kafka, apns: apns)
        environment["PUSH_APNS_KEY_ID"] = "UNKNOWNKEY"
        let refused = await ConfigurationCheck.run(environment: environment, options: options)
        #expect(refused.exitStatus == 1)
        #expect(apns.server.requests.count == 2)
        #expect(Self.result(refused, "apns com.example.chat")?.passed == true, "the token is signed; Apple refuses it")
        let refusal = try #require(Self.result(refused, "apns com.example.chat probe"))
        #expect(!refusal.passed)
        #expect(refusal.detail.hasSuffix("HTTP 403 InvalidProviderToken"), "\(refusal)")
        await fcm.server.stop()
        await apns.stop()
    }

    @Test("--json prints one object per check and exit status 1 on a failure")
    func jsonLines() async throws {
        let kafka = try KafkaFixture()
        let apns = try await APNsSandboxFixture.start()
        var environment = Self.environment(kafka: kafka, apns: apns)
        environment["PUSH_OUTCOMES_TOPIC"] = "push.outcomes.missing"
        let report = await ConfigurationCheck.run(environment: environment, options: .init(timeout: .seconds(10)))
        #expect(report.exitStatus == 1)
        #expect(report.jsonLines.count == report.results.count)
        for (line, result) in zip(report.jsonLines, report.results) {
            let object = try JSONParser.parse(Array(line.utf8))
            #expect(object["check"] == .string(result.check) && object["ok"] == .bool(result.passed))
            #expect(object["detail"] == .string(result.detail))
        }
        #expect(report.jsonLines.contains(#"{"check":"kafka topic outcomes","ok":false,"detail":"push.outcomes.missing does not exist"}"#))
        #expect(report.lines.contains("FAIL kafka topic outcomes: push.outcomes.missing does not exist"))
        #expect(report.lines.contains("ok   kafka topic jobs: push.jobs: 2 partitions"))
        await apns.stop()
    }

    @Test("a configuration start-up refuses exits 2 with one line per problem; an unknown variable fails with 1")
    func configurationRefused() async throws {
        let refused = await ConfigurationCheck.run(environment: ["PUSH_APNS_KEY_ID": "KEYID4APNS"])
        #expect(refused.exitStatus == 2)
        #expect(refused.lines.contains { $0.hasPrefix("FAIL configuration: PUSH_KAFKA_BROKERS is required") }, "\(refused.lines)")
        let kafka = try KafkaFixture()
        let apns = try await APNsSandboxFixture.start()
        var environment = Self.environment(kafka: kafka, apns: apns)
        environment["PUSH_KAFAK_GROUP_ID"] = "typo"
        let typo = await ConfigurationCheck.run(environment: environment, options: .init(timeout: .seconds(10)))
        #expect(typo.exitStatus == 1)
        #expect(typo.failures == [.fail("configuration", "PUSH_KAFAK_GROUP_ID is not a push-worker variable (a typo?)")])
        await apns.stop()
    }

    @Test("each group of checks has a deadline: work that never answers fails at it, and is cancelled")
    func deadline() async throws {
        let cancelled = Locked(false)
        let results = await ConfigurationCheck.withDeadline(.milliseconds(200), name: "kafka") {
            // An hour: only the deadline can end this wait (a wall-clock bound would measure the test machine's load).
            do { try await Task.sleep(for: .seconds(3600)) } catch { cancelled.withLock { $0 = true } }
            return [.ok("kafka metadata", "late")]
        }
        #expect(results == [.fail("kafka", "no answer within 0.2 s")])
        var waited = 0
        while !cancelled.withLock({ $0 }), waited < 600 {
            try await Task.sleep(for: .milliseconds(100))
            waited += 1
        }
        #expect(cancelled.withLock { $0 }, "the work is cancelled once the deadline passed")
    }
}

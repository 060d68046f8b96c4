import Foundation
import PushCore
import PushCrypto
import PushSandbox
import Synchronization
import Testing
import TestSupport
@testable import PushRedis

@Suite("Redis client (swift-nio, hiredis' reply reader) against a real redis-server")
struct RedisClientTests {
    @Test("redis:// URLs: password, user, port and database; the description masks the password")
    func urls() throws {
        let full = try #require(RedisURL("redis://worker:s3cret@cache.internal:6380/2"))
        #expect(full.host == "cache.internal")
        #expect(full.port == 6380)
        #expect(full.database == 2)
        #expect(full.username == "worker")
        #expect(full.password == "s3cret")
        #expect(full.description == "redis://worker:***@cache.internal:6380/2")
        let passwordOnly = try #require(RedisURL("redis://:p%40ss@10.0.0.5"))
        #expect(passwordOnly.password == "p@ss")
        #expect(passwordOnly.username == nil)
        #expect(passwordOnly.port == 6379)
        #expect(RedisURL("http://x") == nil)
        #expect(RedisURL("redis://host:99999") == nil)
        #expect(RedisURL("redis://host/x") == nil)
        let seeds = try #require(RedisURL("redis://:pw@10.0.0.1:7000,10.0.0.2,[::1]:7002/0"))
        #expect(
            seeds.seeds == [
                RedisNodeAddress(host: "10.0.0.1", port: 7000), RedisNodeAddress(host: "10.0.0.2", port: 6379),
                RedisNodeAddress(host: "::1", port: 7002),
            ])
        #expect(seeds.host == "10.0.0.1" && seeds.port == 7000)
        #expect(seeds.description == "redis://:***@10.0.0.1:7000,10.0.0.2:6379,[::1]:7002/0")
        #expect(RedisURL("redis://a:1,,b:2") == nil)
    }

    @Test(
        "a pipeline of commands is answered in order in one call; error replies come back as values",
        arguments: RedisDeployment.allCases)
    func pipeline(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let client = server.client()
        let replies = try await client.pipeline(
            (0..<1000).map { RedisCommand("SET", "k\($0)", "v\($0)", "NX", "PX", "10000") }
                + [RedisCommand("GET", "k7"), RedisCommand("INCR", "k7"), RedisCommand("GET", "missing")])
        #expect(replies.count == 1003)
        #expect(replies[0] == .status("OK"))
        #expect(replies[1000].string == "v7")
        guard case .error(let message) = replies[1001] else {
            Issue.record("expected an error reply")
            return
        }
        #expect(message.contains("not an integer"))
        #expect(replies[1002] == .null)
    }

    @Test("a pipeline is written as RESP arrays of bulk strings, all commands in one buffer")
    func requestEncoding() {
        let request = RedisProtocol.request([
            RedisCommand("GET", "k"), RedisCommand([Array("SET".utf8), Array("key".utf8), [0, 13, 10, 255], []]),
        ])
        let expected =
            Array("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*4\r\n$3\r\nSET\r\n$3\r\nkey\r\n$4\r\n".utf8) + [0, 13, 10, 255]
            + Array("\r\n$0\r\n\r\n".utf8)
        #expect(request == expected)
        #expect(
            RedisProtocol.request([RedisCommand((0..<12).map { _ in Array(repeating: 120, count: 1234) })]).starts(
                with: Array("*12\r\n$1234\r\n".utf8)))
    }

    @Test("a binding\'s keys are 42 bytes whatever its ids (any script, any length), written into a command as their text")
    func hashedKeyBytes() {
        for (bindingId, id) in [("b1", "j1"), ("bé-ü", "job-😀"), (String(repeating: "x", count: 300), "")] {
            let key = RedisKeys.dedupeKey(bindingId: bindingId, identity: id)
            var command = RedisCommand(argumentCount: 2, capacity: 0)
            command.append("GET")
            command.append(key)
            #expect(command.arguments == [Array("GET".utf8), Array(RedisKeys.dedupe(bindingId: bindingId, identity: id).utf8)])
            #expect(key.byteCount == 42)
            #expect(RedisKeys.cancellation(bindingId: bindingId, userId: id, key: "k").utf8.count == 42)
        }
        let claim = RedisKeys.dedupe(bindingId: "b", identity: "j")
        #expect(claim.hasPrefix("push:{") && claim.dropFirst(18).hasPrefix("}d"), "push:{<12-character tag>}d<digest>")
        #expect(RedisKeys.cancellation(bindingId: "b", userId: "u", key: "j").dropFirst(18).hasPrefix("}c"))
        #expect(
            claim != RedisKeys.cancellation(bindingId: "b", userId: "", key: "j"), "a claim and a cancel of the same ids differ")
        #expect(RedisKeys.mark(MarkedPartition(group: "g", topic: "push.jobs", partition: 3)) == "push:{mark:1:g:9:push.jobs:3}")
    }

    @Test(
        "a binding's key is its tag, SHA-256 of the length-prefixed binding id, and its digest, SHA-256 of that and the length-prefixed id; a record's field is that digest's first 16 bytes"
    )
    func hashedKeyDerivation() {
        for (bindingId, id) in [("b1", "j1"), ("bé-ü", "job-😀"), (String(repeating: "x", count: 300), "")] {
            let binding = Array("\(bindingId.utf8.count):\(bindingId)".utf8)
            let both = binding + Array("\(id.utf8.count):\(id)".utf8)
            let tag = Base64URL.encode(Array(Digest.sha256(binding)[0..<9]))
            let digest = Array(Digest.sha256(both)[0..<16])
            #expect(RedisKeys.dedupeKey(bindingId: bindingId, identity: id).text == "push:{\(tag)}d\(Base64URL.encode(digest))")
            #expect(RedisKeys.recordDigest(bindingId: bindingId, jobId: id) == digest)
        }
    }

    @Test("a command keeps its arguments as written: binary ones, empty ones, and the key a cluster routes it by")
    func commandArguments() {
        let binary: [UInt8] = [0, 13, 10, 36, 255]
        #expect(
            RedisCommand([Array("SET".utf8), binary, [], Array("PX".utf8)]).arguments == [Array("SET".utf8), binary, [], Array("PX".utf8)])
        #expect(RedisCommand("GET", "push:{b:1:x}:sent:1:y").firstKey == Array("push:{b:1:x}:sent:1:y".utf8))
        #expect(RedisCommand("EVALSHA", "abc", "2", "k1", "k2", "arg").firstKey == Array("k1".utf8))
        #expect(RedisCommand("EVALSHA", "abc", "0", "arg").firstKey == nil)
        #expect(RedisCommand("MULTI").firstKey == nil)
        #expect(RedisCommand("exec").isNamed("EXEC"))
        #expect(!RedisCommand("EXECUTE").isNamed("EXEC"))
    }

    @Test("values are binary-safe: bytes that look like the protocol come back unchanged", arguments: RedisDeployment.allCases)
    func binaryValues(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let client = server.client()
        let value: [UInt8] = Array("\r\n*1\r\n$3\r\nDEL\r\n".utf8) + [0, 255] + Array(repeating: 36, count: 70_000)
        let replies = try await client.pipeline([
            RedisCommand([Array("SET".utf8), Array("binary".utf8), value]), RedisCommand("GET", "binary"),
            RedisCommand([Array("SET".utf8), Array("empty".utf8), []]), RedisCommand("STRLEN", "empty"),
        ])
        #expect(replies[0] == .status("OK"))
        #expect(replies[1] == .bulk(value))
        #expect(replies[3] == .integer(0))
    }

    @Test("AUTH from the URL's password; a wrong password is a clear error")
    func authentication() async throws {
        let server = try await RedisServerProcess.launch(password: "hunter2")
        #expect(try await server.client().command(RedisCommand("PING")) == .status("PONG"))
        let wrong = RedisClient(url: RedisURL("redis://:wrong@127.0.0.1:\(server.port)")!, connections: 1)
        await #expect(throws: RedisError.self) { try await wrong.command(RedisCommand("PING")) }
    }

    @Test("a stopped server is 'unavailable'; the client reconnects by itself when it is back")
    func reconnects() async throws {
        let server = try await RedisServerProcess.launch()
        let client = server.client(connections: 1)
        #expect(await client.ping())
        server.stop()
        do {
            _ = try await client.command(RedisCommand("PING"))
            Issue.record("a command to a stopped server succeeded")
        } catch {
            guard case .unavailable = error else {
                Issue.record("expected unavailable, got \(error)")
                return
            }
        }
        try await server.start()
        #expect(await client.ping())
    }

    @Test("scripts run by SHA and are reloaded after the server forgot them")
    func scripts() async throws {
        let server = try await RedisServerProcess.launch()
        let client = server.client(connections: 1)
        let script = RedisScript("return tonumber(ARGV[1]) + 1")
        #expect(try await client.evaluate(script, keys: [], arguments: [Array("41".utf8)]) == .integer(42))
        _ = try await client.command(RedisCommand("SCRIPT", "FLUSH"))
        #expect(try await client.evaluate(script, keys: [], arguments: [Array("1".utf8)]) == .integer(2))
    }
}

@Suite("Dedupe windows and idempotency records in Redis")
struct RedisDeliveryStoreTests {
    static func job(_ id: String, kind: JobKind = .call, dedupeKey: String? = nil, bindings: [String] = ["b1"]) -> Job {
        Job(
            id: id, createdAt: 0, ttl: 60, kind: kind, priority: .high, userId: "u", dedupeKey: dedupeKey,
            targets: bindings.map { Target(bindingId: $0, provider: "proxy") })
    }

    @Test("a second job with the same identity to the same binding inside the window is a duplicate", arguments: RedisDeployment.allCases)
    func duplicateInsideWindow(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let store = RedisDeliveryStore(client: server.client(), recordRetention: .seconds(60))
        #expect(try await store.prepare(Self.job("j1"), dedupeWindow: 60_000) == [.fresh])
        #expect(try await store.prepare(Self.job("j2"), dedupeWindow: 60_000) == [.duplicate(ofJob: "j1")])
        #expect(
            try await store.prepare(Self.job("j3", bindings: ["b2"]), dedupeWindow: 60_000) == [.fresh], "other bindings are independent")
        #expect(
            try await store.prepare(Self.job("j4", dedupeKey: "other"), dedupeWindow: 60_000) == [.fresh],
            "other identities are independent")
    }

    @Test(
        "a target never sent (refused or unbound) claims no dedupe window: the same call to that binding once it is valid is sent",
        arguments: RedisDeployment.allCases)
    func unsendableTargetsClaimNoWindow(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let stores: [any DeliveryStore] = [
            RedisDeliveryStore(client: server.client(), recordRetention: .seconds(60)), InMemoryDeliveryStore(),
        ]
        for store in stores {
            var refused = Self.job("j1", dedupeKey: "call-7", bindings: ["b1", "b2"])
            refused.targets[0].refusal = JobRejection(.invalidField, "targets[0].rfc8599 pn-prid is required (null to unbind)")
            refused.targets[1].isUnbound = true
            #expect(try await store.prepare(refused, dedupeWindow: 60_000) == [.fresh, .fresh])
            #expect(
                try await store.prepare(Self.job("j2", dedupeKey: "call-7", bindings: ["b1", "b2"]), dedupeWindow: 60_000)
                    == [.fresh, .fresh], "the registration fixed, the call goes")
        }
    }

    @Test("each target of one job gets its own answer: recorded, duplicate of another job, or fresh", arguments: RedisDeployment.allCases)
    func perTargetAnswers(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let store = RedisDeliveryStore(client: server.client(), recordRetention: .seconds(60))
        #expect(try await store.prepare(Self.job("earlier", bindings: ["b2", "b4"]), dedupeWindow: 60_000) == [.fresh, .fresh])
        let job = Self.job("j1", bindings: ["b1", "b2", "b3", "b4"])
        let recorded = Outcome(
            job: job, target: job.targets[0], result: .delivered(providerMessageId: nil, httpStatus: 200), attempts: 1, at: 1)
        try await store.record(recorded)
        #expect(
            try await store.prepare(job, dedupeWindow: 60_000)
                == [.alreadyFinished(recorded), .duplicate(ofJob: "earlier"), .fresh, .duplicate(ofJob: "earlier")])
        #expect(
            try await store.prepare(job, dedupeWindow: 60_000)
                == [.alreadyFinished(recorded), .duplicate(ofJob: "earlier"), .fresh, .duplicate(ofJob: "earlier")],
            "asked again (a redelivery), the answers stay")
    }

    @Test("the same job redelivered is not a duplicate of itself", arguments: RedisDeployment.allCases)
    func redeliveryIsNotDuplicate(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let store = RedisDeliveryStore(client: server.client(), recordRetention: .seconds(60))
        #expect(try await store.prepare(Self.job("j1"), dedupeWindow: 5000) == [.fresh])
        #expect(try await store.prepare(Self.job("j1"), dedupeWindow: 5000) == [.fresh])
    }

    @Test("after the window both deliver; window 0 disables dedupe", arguments: RedisDeployment.allCases)
    func afterWindow(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let store = RedisDeliveryStore(client: server.client(), recordRetention: .seconds(60))
        #expect(try await store.prepare(Self.job("j1"), dedupeWindow: 300) == [.fresh])
        try await Task.sleep(for: .milliseconds(400))
        #expect(try await store.prepare(Self.job("j2"), dedupeWindow: 300) == [.fresh])
        #expect(try await store.prepare(Self.job("j3"), dedupeWindow: 0) == [.fresh])
        #expect(try await store.prepare(Self.job("j4"), dedupeWindow: 0) == [.fresh])
    }

    @Test("a recorded final outcome is returned for the same job and binding, whole", arguments: RedisDeployment.allCases)
    func idempotencyRecord(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let store = RedisDeliveryStore(client: server.client(), recordRetention: .seconds(60))
        let job = Self.job("j1", bindings: ["b1", "b2"])
        let outcome = Outcome(
            job: job, target: job.targets[0], result: .delivered(providerMessageId: "m-1", httpStatus: 200),
            attempts: 1, at: 1234)
        try await store.record(outcome)
        #expect(try await store.prepare(job, dedupeWindow: 5000) == [.alreadyFinished(outcome), .fresh])
        #expect(try await store.recordedOutcome(of: job, target: job.targets[0]) == outcome)
        #expect(try await store.recordedOutcome(of: job, target: job.targets[1]) == nil)
    }

    @Test(
        "outcomes recorded with no task waiting are each stored whole, the client's first command included; the completion comes once",
        arguments: RedisDeployment.allCases)
    func recordWithCompletion(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let store = RedisDeliveryStore(client: server.client(), recordRetention: .seconds(60))
        let job = Self.job("j2", bindings: ["b1", "b2", "b3"])
        let outcomes = job.targets.map { target in
            Outcome(
                job: job, target: target, result: .delivered(providerMessageId: "m-\(target.bindingId)", httpStatus: 200), attempts: 1,
                at: 99)
        }
        let calls = Mutex(0)
        let error = await withCheckedContinuation { continuation in
            store.record(outcomes.map(EncodedOutcome.init)) { error in
                if calls.withLock({ calls in
                    calls += 1
                    return calls == 1
                }) {
                    continuation.resume(returning: error)
                }
            }
        }
        #expect(error == nil)
        for (target, outcome) in zip(job.targets, outcomes) {
            #expect(try await store.recordedOutcome(of: job, target: target) == outcome)
        }
        #expect(calls.withLock { $0 } == 1)
    }

    @Test(
        "a record is found for its whole retention, by a replica whose clock is up to a slice off; its hash expires between the retention and one slice more",
        arguments: RedisDeployment.allCases)
    func recordsLiveInSharedHashes(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let client = server.client()
        let written: Int64 = 1_800_000_012_345
        let writer = RedisDeliveryStore(client: client, recordRetention: .seconds(80), clock: { written })
        let jobs = (0..<200).map { Self.job("j\($0)", bindings: ["b\($0 % 7)"]) }
        let outcomes = jobs.map { job in
            Outcome(
                job: job, target: job.targets[0], result: .delivered(providerMessageId: "m-\(job.id)", httpStatus: 200), attempts: 1, at: 5)
        }
        let recording = ContinuousClock.now
        try await writer.record(outcomes)
        let buckets = RecordBuckets(retention: .seconds(80))
        #expect(buckets.slice == 10_000)
        var hashes = Set<RedisKeys.RecordBucketKey>()
        for outcome in outcomes {
            hashes.insert(buckets.bucket(of: RedisKeys.recordDigest(bindingId: outcome.bindingId, jobId: outcome.jobId), at: written))
        }
        #expect(hashes.count < outcomes.count, "records share hashes")
        let ttls = try await client.pipeline(hashes.map { RedisCommand("PTTL", $0.text) }).map { $0.integer ?? -1 }
        let elapsed = (ContinuousClock.now - recording).milliseconds
        // Written at 12 345 ms into a 10 s slice: the slice ends 7 655 ms later, then the 80 s retention.
        #expect(
            ttls.allSatisfy { $0 <= 87_655 && $0 >= 87_655 - elapsed - 1 }, "\(ttls.min() ?? 0)…\(ttls.max() ?? 0) ms, \(elapsed) ms after")
        for readAt in [written - 9_000, written, written + 40_000, written + 79_999] {
            let reader = RedisDeliveryStore(client: client, recordRetention: .seconds(80), clock: { readAt })
            for (job, outcome) in zip(jobs, outcomes).prefix(20) {
                #expect(try await reader.recordedOutcome(of: job, target: job.targets[0]) == outcome, "read at \(readAt - written) ms")
                #expect(try await reader.prepare(job, dedupeWindow: 0) == [.alreadyFinished(outcome)])
            }
        }
        let otherRetention = RedisDeliveryStore(client: client, recordRetention: .seconds(120), clock: { written })
        #expect(
            try await otherRetention.recordedOutcome(of: jobs[0], target: jobs[0].targets[0]) == nil,
            "a replica with another retention reads slices of its own length")
    }

    @Test("a record hash deleted while written to gets its expiry back within the refresh interval", arguments: RedisDeployment.allCases)
    func recordHashExpiryIsSetAgain(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let client = server.client()
        let now = Mutex<Int64>(1_800_000_000_000)
        let store = RedisDeliveryStore(client: client, recordRetention: .seconds(3_600), clock: { now.withLock { $0 } })
        let job = Self.job("j1")
        let outcome = Outcome(
            job: job, target: job.targets[0], result: .delivered(providerMessageId: "m", httpStatus: 200), attempts: 1, at: 5)
        let hash = RecordBuckets(retention: .seconds(3_600)).bucket(
            of: RedisKeys.recordDigest(bindingId: "b1", jobId: "j1"), at: now.withLock { $0 })
        try await store.record(outcome)
        #expect(try await client.command(RedisCommand("PTTL", hash.text)).integer ?? -1 > 0)
        _ = try await client.command(RedisCommand("DEL", hash.text))
        now.withLock { $0 += 1_000 }
        try await store.record(outcome)
        #expect(try await client.command(RedisCommand("PTTL", hash.text)) == .integer(-1), "set less than the refresh interval ago")
        now.withLock { $0 += RedisDeliveryStore.expiryRefresh }
        try await store.record(outcome)
        #expect(try await client.command(RedisCommand("PTTL", hash.text)).integer ?? -1 > 0)
    }

    @Test(
        "a first delivery reads no record; one whose own id already holds the window (produced twice) reads them",
        arguments: RedisDeployment.allCases)
    func firstDeliveryReadsRecordsOnlyWhenItsIdHoldsTheWindow(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let store = RedisDeliveryStore(client: server.client(), recordRetention: .seconds(60))
        let job = Self.job("j1", kind: .message)
        let outcome = Outcome(
            job: job, target: job.targets[0], result: .delivered(providerMessageId: "m-1", httpStatus: 200), attempts: 1, at: 7)
        try await store.record(outcome)
        #expect(try await store.prepare(job, dedupeWindow: 0, firstDelivery: true) == [.fresh], "nothing is read")
        #expect(try await store.prepare(job, dedupeWindow: 60_000, firstDelivery: true) == [.fresh], "the window was free")
        #expect(
            try await store.prepare(job, dedupeWindow: 60_000, firstDelivery: true) == [.alreadyFinished(outcome)],
            "its own id held the window: the record is read")
        #expect(
            try await store.prepare(Self.job("j2", kind: .message), dedupeWindow: 60_000, firstDelivery: true) == [.duplicate(ofJob: "j1")])
    }

    @Test("a redelivered target reads its record in every slice it can be in with one command, beside its retry entry")
    func redeliveredTargetReadsAllSlicesInOneCommand() async throws {
        let server = try await RedisServerProcess.launch()
        defer { server.stop() }
        let client = server.client()
        let retention = Duration.seconds(60)
        let store = RedisDeliveryStore(client: client, recordRetention: retention)
        let job = Self.job("j1", kind: .message)
        let outcome = Outcome(
            job: job, target: job.targets[0], result: .delivered(providerMessageId: "m-1", httpStatus: 200), attempts: 1, at: 7)
        try await store.record(outcome)
        let digest = RedisKeys.recordDigest(bindingId: "b1", jobId: "j1")
        #expect(RecordBuckets(retention: retention).buckets(of: digest, at: currentTimeMilliseconds()).count >= 10)
        _ = try await client.command(RedisCommand("CONFIG", "RESETSTAT"))
        #expect(try await store.prepare(job, dedupeWindow: 0, firstDelivery: false) == [.alreadyFinished(outcome)])
        let stats = try await client.command(RedisCommand("INFO", "commandstats")).string ?? ""
        func calls(_ name: String) -> Int? {
            stats.split(whereSeparator: \.isNewline).first { $0.hasPrefix("cmdstat_\(name):calls=") }
                .flatMap { Int($0.dropFirst("cmdstat_\(name):calls=".count).prefix { $0.isNumber }) }
        }
        #expect(calls("eval") == 1, "one script reads every slice")
        #expect(calls("get") == nil, "no key outside the record hashes is read")
        #expect(calls("exists") == 1, "the retry entry")
    }

    @Test(
        "a partition's mark: each take fences the owner before; an advance under an old fence fails; the mark never goes down, whatever the offset's size",
        arguments: RedisDeployment.allCases)
    func partitionMarks(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let store = RedisDeliveryStore(client: server.client(), recordRetention: .seconds(60))
        let partition = MarkedPartition(group: "g", topic: "push.jobs", partition: 2)
        let first = try await store.takeMark(of: partition)
        #expect(first.offset == nil, "no owner marked anything yet")
        #expect(try await store.advanceMark(of: partition, fence: first.fence, to: 4096))
        #expect(try await store.advanceMark(of: partition, fence: first.fence, to: 100), "a lower offset is accepted and changes nothing")
        let second = try await store.takeMark(of: partition)
        #expect(second.fence != first.fence)
        #expect(second.offset == 4096)
        #expect(try await !store.advanceMark(of: partition, fence: first.fence, to: 9000), "the owner before is fenced off")
        #expect(try await store.advanceMark(of: partition, fence: second.fence, to: 8192))
        #expect(try await store.takeMark(of: partition).offset == 8192)
        let late = try await store.takeMark(of: partition)
        // 2^53 and 2^53 + 1 are one double: compared as numbers in Lua, the second would not raise the mark.
        #expect(try await store.advanceMark(of: partition, fence: late.fence, to: 9_007_199_254_740_992))
        #expect(try await store.advanceMark(of: partition, fence: late.fence, to: 9_007_199_254_740_993))
        #expect(try await store.advanceMark(of: partition, fence: late.fence, to: 99_999))
        #expect(try await store.takeMark(of: partition).offset == 9_007_199_254_740_993, "offsets past 2^53 compare exactly")
        let other = try await store.takeMark(of: MarkedPartition(group: "g2", topic: "push.jobs", partition: 2))
        #expect(other.offset == nil, "another group's mark is its own")
    }

    @Test(
        "ids cannot reach into each other's keys: binding a}:sent:x with job y never meets binding a with job x}:sent:y",
        arguments: RedisDeployment.allCases)
    func keysAreUnambiguous(_ deployment: RedisDeployment) async throws {
        #expect(RedisKeys.dedupe(bindingId: "a}:sent:x", identity: "y") != RedisKeys.dedupe(bindingId: "a", identity: "x}:sent:y"))
        #expect(RedisKeys.dedupe(bindingId: "ab", identity: "c") != RedisKeys.dedupe(bindingId: "a", identity: "bc"))
        #expect(RedisKeys.recordDigest(bindingId: "a}:sent:x", jobId: "y") != RedisKeys.recordDigest(bindingId: "a", jobId: "x}:sent:y"))
        #expect(RedisKeys.recordDigest(bindingId: "ab", jobId: "c") != RedisKeys.recordDigest(bindingId: "a", jobId: "bc"))
        #expect(RedisKeys.dedupe(bindingId: "a}:dd:x", identity: "y") != RedisKeys.dedupe(bindingId: "a", identity: "x}:dd:y"))
        #expect(RetryEntry.id(jobId: "a/b", bindingId: "c") != RetryEntry.id(jobId: "a", bindingId: "b/c"))
        let server = try await deployment.start()
        defer { server.stop() }
        let store = RedisDeliveryStore(client: server.client(), recordRetention: .seconds(60))
        let crafted = Job(
            id: "y", createdAt: 0, ttl: 60, kind: .call, priority: .high, userId: "u",
            targets: [Target(bindingId: "a}:sent:x", provider: "proxy")])
        let victim = Job(
            id: "x}:sent:y", createdAt: 0, ttl: 60, kind: .call, priority: .high, userId: "u",
            targets: [Target(bindingId: "a", provider: "proxy")])
        try await store.record(
            Outcome(
                job: crafted, target: crafted.targets[0], result: .delivered(providerMessageId: nil, httpStatus: 200),
                attempts: 1, at: 1))
        #expect(try await store.prepare(victim, dedupeWindow: 0) == [.fresh], "the victim's target is not taken for already sent")
    }
}

@Suite("Retry queue in Redis: leases and atomic claims")
struct RedisRetryQueueTests {
    @Test("a stored attempt count beyond any real history is a damaged record, not a number to add to")
    func damagedAttemptsRefused() {
        let reply = RedisValue.array(
            ["job", "{}", "binding", "b1", "attempts", "\(Int.max)", "fallbackCreatedAt", "0"]
                .map { RedisValue.bulk(Array($0.utf8)) })
        #expect(RedisRetryQueue.entry(id: "1:j/b1", from: reply) == nil)
        let sane = RedisValue.array(
            ["job", "{}", "binding", "b1", "attempts", "3", "fallbackCreatedAt", "0"].map { RedisValue.bulk(Array($0.utf8)) })
        #expect(RedisRetryQueue.entry(id: "1:j/b1", from: sane)?.attempts == 3)
    }

    @Test("a damaged record is taken out of the queue but kept aside, never silently dropped", arguments: RedisDeployment.allCases)
    func damagedRecordKeptAside(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let client = server.client()
        let queue = RedisRetryQueue(client: client, logger: testLogger())
        try await queue.schedule(Self.entry("1:j/b1"), dueAt: 0)
        _ = try await client.command(
            RedisCommand("HSET", RedisKeys.retryEntry("1:j/b1", shard: RedisRetryQueue.shard(of: "1:j/b1")), "attempts", "-3"))
        #expect(try await queue.claimDue(limit: 10, lease: .seconds(30)).isEmpty)
        #expect(try await queue.count() == 0)
        let kept = try await client.command(
            RedisCommand("HGET", RedisKeys.damagedRetryEntry("1:j/b1", shard: RedisRetryQueue.shard(of: "1:j/b1")), "job"))
        #expect(kept.string == #"{"v":1}"#, "the job bytes are still there for the operator")
    }

    static func entry(_ id: String, attempts: Int = 1) -> RetryEntry {
        RetryEntry(
            id: id, jobBytes: Array(#"{"v":1}"#.utf8), kafkaKey: Array("alice".utf8), fallbackCreatedAt: 5,
            bindingId: "b1", attempts: attempts, lastReason: "proxy answered 500", lastHTTPStatus: 500)
    }

    @Test("an entry is claimed only when due, whole, and is gone once completed", arguments: RedisDeployment.allCases)
    func scheduleClaimComplete(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let queue = RedisRetryQueue(client: server.client())
        try await queue.schedule(Self.entry("r1"), dueAt: currentTimeMilliseconds() + 3_600_000)
        #expect(try await queue.claimDue(limit: 10, lease: .seconds(30)).isEmpty)
        try await queue.schedule(Self.entry("r1"), dueAt: currentTimeMilliseconds())
        let claimed = try await queue.claimDue(limit: 10, lease: .seconds(30))
        #expect(claimed.map(\.entry) == [Self.entry("r1")])
        try await queue.complete("r1")
        #expect(try await queue.count() == 0)
        #expect(try await queue.claimDue(limit: 10, lease: .seconds(30)).isEmpty)
    }

    @Test(
        "the queue's depth counts every entry, and as overdue only those due longer ago than the threshold and not claimed since",
        arguments: RedisDeployment.allCases)
    func depth(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let client = server.client()
        let queue = RedisRetryQueue(client: client)
        for id in ["long-due", "just-due"] { try await queue.schedule(Self.entry(id), dueAt: currentTimeMilliseconds()) }
        try await queue.schedule(Self.entry("later"), dueAt: currentTimeMilliseconds() + 3_600_000)
        // Due an hour ago: far past the threshold, where the entry due now stays however slow the machine.
        _ = try await client.command(
            RedisCommand(
                "ZADD", RedisKeys.retryIndex(shard: RedisRetryQueue.shard(of: "long-due")), "XX",
                String(currentTimeMilliseconds() - 3_600_000), "long-due"))
        #expect(try await queue.depth(overdueAfter: .seconds(60)) == RetryQueueDepth(entries: 3, overdue: 1))
        #expect(Set(try await queue.claimDue(limit: 10, lease: .seconds(30)).map(\.entry.id)) == ["long-due", "just-due"])
        #expect(try await queue.depth(overdueAfter: .zero) == RetryQueueDepth(entries: 3, overdue: 0))
    }

    @Test("a claimed entry is invisible to other claimers until its lease ends, then due again", arguments: RedisDeployment.allCases)
    func leases(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let first = RedisRetryQueue(client: server.client())
        let second = RedisRetryQueue(client: server.client())
        try await first.schedule(Self.entry("r1"), dueAt: 0)
        // Leases long enough that a loaded machine (whose task pool has stalled for seconds) claims twice within one.
        #expect(try await first.claimDue(limit: 10, lease: .seconds(8)).map(\.entry.id) == ["r1"])
        #expect(try await second.claimDue(limit: 10, lease: .seconds(8)).isEmpty)
        try await Task.sleep(for: .milliseconds(8200))
        #expect(try await second.claimDue(limit: 10, lease: .seconds(8)).map(\.entry.id) == ["r1"])
    }

    @Test("many concurrent claimers never receive the same entry twice", arguments: RedisDeployment.allCases)
    func concurrentClaims(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let queue = RedisRetryQueue(client: server.client(connections: 8))
        for index in 0..<300 { try await queue.schedule(Self.entry("r\(index)"), dueAt: 0) }
        let batches = try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<8 {
                group.addTask {
                    var mine: [String] = []
                    while true {
                        let claimed = try await queue.claimDue(limit: 7, lease: .seconds(60)).map(\.entry.id)
                        if claimed.isEmpty { return mine }
                        mine += claimed
                    }
                }
            }
            return try await group.reduce(into: [[String]]()) { $0.append($1) }
        }
        let all = batches.flatMap { $0 }
        #expect(all.count == 300)
        #expect(Set(all).count == 300)
    }

    @Test("rescheduling keeps one entry with the new attempt count", arguments: RedisDeployment.allCases)
    func reschedule(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let queue = RedisRetryQueue(client: server.client())
        try await queue.schedule(Self.entry("r1", attempts: 1), dueAt: 0)
        _ = try await queue.claimDue(limit: 1, lease: .seconds(30))
        try await queue.schedule(Self.entry("r1", attempts: 2), dueAt: 0)
        #expect(try await queue.count() == 1)
        #expect(try await queue.claimDue(limit: 10, lease: .seconds(30)).map(\.entry.attempts) == [2])
    }
}

@Suite("Retry leases: renewed while their retry runs, judged by Redis's clock")
struct RetryLeaseTests {
    @Test("a renewed lease is not claimed by another scheduler after the claim's lease time", arguments: RedisDeployment.allCases)
    func renewedLeaseHolds(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let first = RedisRetryQueue(client: server.client())
        let second = RedisRetryQueue(client: server.client())
        try await first.schedule(RedisRetryQueueTests.entry("r1"), dueAt: 0)
        let claim = try #require(try await first.claimDue(limit: 10, lease: .seconds(3)).first)
        let renewed = try await first.renew([claim.lease], for: .seconds(60))
        #expect(renewed.count == 1 && renewed[0] != nil && renewed[0]!.end > claim.lease.end)
        try await Task.sleep(for: .milliseconds(3200))
        #expect(try await second.claimDue(limit: 10, lease: .seconds(60)).isEmpty, "the claim's 3 s are over, the renewal's 60 s are not")
        #expect(try await first.renew([renewed[0]!], for: .seconds(60))[0] != nil, "the holder renews again with the renewed lease")
    }

    @Test("a lease that lapsed and was taken over is not renewed by its first holder", arguments: RedisDeployment.allCases)
    func lostLeaseNotRenewed(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let client = server.client()
        let first = RedisRetryQueue(client: client)
        let second = RedisRetryQueue(client: server.client())
        for id in ["r1", "r2"] { try await first.schedule(RedisRetryQueueTests.entry(id), dueAt: 0) }
        let claims = try await first.claimDue(limit: 10, lease: .seconds(2)).sorted { $0.entry.id < $1.entry.id }
        #expect(claims.map(\.entry.id) == ["r1", "r2"])
        let r2 = try #require(try await first.renew([claims[1].lease], for: .seconds(60))[0])
        try await Task.sleep(for: .milliseconds(2200))
        let taken = try await second.claimDue(limit: 10, lease: .seconds(60))
        #expect(taken.map(\.entry.id) == ["r1"])
        let renewals = try await first.renew([claims[0].lease, r2], for: .seconds(600))
        #expect(renewals[0] == nil, "r1's lease is the second scheduler's now")
        #expect(renewals[1] != nil, "r2's lease was renewed in time and is still the first's")
        let index = RedisKeys.retryIndex(shard: RedisRetryQueue.shard(of: "r1"))
        let score = try await client.command(RedisCommand("ZSCORE", index, "r1")).string.flatMap { Int64($0) }
        #expect(score == taken[0].lease.end, "the second scheduler's lease is untouched")
    }

    @Test("a lease still held after it lapsed (nobody claimed it) is renewed")
    func lapsedButHeldIsRenewed() async throws {
        let server = try await RedisServerProcess.launch()
        defer { server.stop() }
        let queue = RedisRetryQueue(client: server.client())
        try await queue.schedule(RedisRetryQueueTests.entry("r1"), dueAt: 0)
        let claim = try #require(try await queue.claimDue(limit: 10, lease: .milliseconds(100)).first)
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await queue.renew([claim.lease], for: .seconds(60))[0] != nil)
        #expect(try await queue.claimDue(limit: 10, lease: .seconds(60)).isEmpty)
    }

    @Test(
        "a replica whose clock is an hour off neither takes leased entries nor delays or hastens due ones",
        arguments: [Int64(3_600_000), -3_600_000])
    func skewedClock(_ skew: Int64) async throws {
        let server = try await RedisServerProcess.launch()
        defer { server.stop() }
        let honest = RedisRetryQueue(client: server.client())
        let skewed = RedisRetryQueue(client: server.client(), clock: { currentTimeMilliseconds() + skew })
        // Handed off by the skewed replica: due now, and due in a minute, by its own clock.
        try await skewed.schedule(RedisRetryQueueTests.entry("now"), dueAt: currentTimeMilliseconds() + skew)
        try await skewed.schedule(RedisRetryQueueTests.entry("later"), dueAt: currentTimeMilliseconds() + skew + 60_000)
        let claimed = try await honest.claimDue(limit: 10, lease: .seconds(60))
        #expect(claimed.map(\.entry.id) == ["now"], "due now is due now, due in a minute is not due yet")
        // Leased by the honest replica: the skewed one cannot take it.
        #expect(try await skewed.claimDue(limit: 10, lease: .seconds(60)).isEmpty)
        // Leased by the skewed replica: the honest one cannot take it, and the skewed one renews it.
        try await honest.schedule(RedisRetryQueueTests.entry("mine"), dueAt: 0)
        let held = try await skewed.claimDue(limit: 10, lease: .seconds(60))
        #expect(held.map(\.entry.id) == ["mine"])
        #expect(try await honest.claimDue(limit: 10, lease: .seconds(60)).isEmpty)
        #expect(try await skewed.renew(held.map(\.lease), for: .seconds(60))[0] != nil)
    }
}

@Suite("The retry queue's shards")
struct RedisRetryShardTests {
    @Test("entries spread over every shard, and claims take from all of them, each entry once", arguments: RedisDeployment.allCases)
    func entriesSpreadOverShards(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let queue = RedisRetryQueue(client: server.client())
        for index in 0..<320 { try await queue.schedule(RedisRetryQueueTests.entry("\(index):job/b"), dueAt: 0) }
        let perShard = try await queue.countPerShard()
        #expect(perShard.count == RedisRetryQueue.shardCount && perShard.allSatisfy { $0 > 0 }, "every shard holds entries: \(perShard)")
        let first = try await queue.claimDue(limit: 50, lease: .seconds(60))
        #expect(first.count == 50)
        #expect(
            Set(first.map { RedisRetryQueue.shard(of: $0.entry.id) }).count == RedisRetryQueue.shardCount, "one claim reaches every shard")
        var all = first.map(\.entry.id)
        while true {
            let claimed = try await queue.claimDue(limit: 37, lease: .seconds(60))
            if claimed.isEmpty { break }
            all += claimed.map(\.entry.id)
        }
        #expect(all.count == 320 && Set(all).count == 320)
    }
}

@Suite("Redelivery of a job whose target waits in the retry queue")
struct RetryOwnershipTests {
    @Test("a target with a pending retry entry is reported as owned by the queue, not fresh", arguments: RedisDeployment.allCases)
    func pendingRetryOwnsTarget(_ deployment: RedisDeployment) async throws {
        let server = try await deployment.start()
        defer { server.stop() }
        let client = server.client()
        let job = RedisDeliveryStoreTests.job("j1", bindings: ["b1", "b2", "b3"])
        try await RedisRetryQueue(client: client).schedule(
            RetryEntry(
                id: RetryEntry.id(jobId: "j1", bindingId: "b2"), jobBytes: [], kafkaKey: nil, fallbackCreatedAt: 0,
                bindingId: "b2", attempts: 1, lastReason: "x", lastHTTPStatus: nil), dueAt: 0)
        let store = RedisDeliveryStore(client: client, recordRetention: .seconds(60))
        #expect(try await store.prepare(job, dedupeWindow: 0) == [.fresh, .inRetryQueue, .fresh])
        #expect(
            try await store.prepare(job, dedupeWindow: 60_000) == [.fresh, .inRetryQueue, .fresh],
            "with the dedupe claims between the checks")
    }

    @Test("a target's retry entry key, as the checks write it, is the retry queue's: one key, in the entry's shard")
    func checkedRetryKey() {
        let job = RedisDeliveryStoreTests.job("jöb-1", bindings: ["bïnd-2"])
        let id = RetryEntry.id(jobId: "jöb-1", bindingId: "bïnd-2")
        let key = Array(RedisKeys.retryEntry(id, shard: RedisRetryQueue.shard(of: id)).utf8)
        let buckets = RecordBuckets(retention: .seconds(3_600))
        func checks(dedupeWindow: Int64) -> [[[UInt8]]] {
            RedisDeliveryStore.Checks(job, dedupeWindow: dedupeWindow, readingRecords: true, buckets: buckets, now: 1_800_000_000_000)
                .commands.map(\.arguments)
        }
        let reads = 1  // one script over the record's slices
        let withoutDedupe = checks(dedupeWindow: 0)
        #expect(withoutDedupe.count == reads + 1)
        #expect(withoutDedupe[reads] == [Array("EXISTS".utf8), key])
        let withDedupe = checks(dedupeWindow: 1000)
        #expect(withDedupe.count == reads + 2)
        #expect(withDedupe[reads] == [Array("EXISTS".utf8), key])
        #expect(withDedupe[reads + 1].first == Array("SET".utf8))
    }

    @Test("a first delivery's checks are one SET NX GET per target with dedupe on, and nothing with it off")
    func firstDeliveryCommands() {
        let job = RedisDeliveryStoreTests.job("j1", bindings: ["b1", "b2"])
        let buckets = RecordBuckets(retention: .seconds(3_600))
        #expect(RedisDeliveryStore.Checks(job, dedupeWindow: 0, readingRecords: false, buckets: buckets, now: 0).commands.isEmpty)
        let claims = RedisDeliveryStore.Checks(job, dedupeWindow: 1000, readingRecords: false, buckets: buckets, now: 0).commands
            .map(\.arguments)
        #expect(
            claims
                == job.targets.map { target in
                    [
                        "SET", RedisKeys.dedupe(bindingId: target.bindingId, identity: DedupeWindows.identity(of: job)), "j1", "NX", "GET",
                        "PX", "1000",
                    ]
                    .map { Array($0.utf8) }
                })
    }
}

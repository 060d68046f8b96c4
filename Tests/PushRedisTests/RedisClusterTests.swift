import Foundation
import PushCore
import PushSandbox
import Testing
import TestSupport
@testable import PushRedis

@Suite("Key slots as Redis Cluster computes them")
struct RedisKeySlotTests {
    @Test("CRC16/XMODEM modulo 16384, the specification's examples")
    func slots() {
        #expect(RedisKeySlot.crc16(Array("123456789".utf8)[...]) == 0x31C3, "the specification's check value")
        #expect(RedisKeySlot.of("foo") == 12182)
        #expect(RedisKeySlot.of("bar") == 5061)
    }

    @Test("a hash tag decides the slot: the part between the first { and the next }, when not empty")
    func hashTags() {
        #expect(RedisKeySlot.of("{user1000}.following") == RedisKeySlot.of("{user1000}.followers"))
        #expect(RedisKeySlot.of("{user1000}.following") == RedisKeySlot.of("user1000"))
        #expect(RedisKeySlot.of("foo{}{bar}") == RedisKeySlot.of("foo{}{bar}"), "an empty tag means the whole key")
        #expect(RedisKeySlot.of("foo{}{bar}") != RedisKeySlot.of("bar"))
        #expect(RedisKeySlot.of("foo{{bar}}zap") == RedisKeySlot.of("{bar"))
        #expect(
            Set(
                [
                    RedisKeys.dedupe(bindingId: "b1", identity: "y"), RedisKeys.dedupe(bindingId: "b1", identity: "x"),
                    RedisKeys.cancellation(bindingId: "b1", userId: "u", key: "k"),
                ].map(RedisKeySlot.of)
            ).count == 1,
            "everything about one binding shares its slot")
    }

    @Test(
        "only an error that says so makes a node a single node: a loading or failing cluster node is asked again",
        arguments: [
            ("ERR This instance has cluster support disabled", true),
            ("NOPERM User worker has no permissions to run the 'cluster|slots' command", true),
            ("ERR unknown command 'CLUSTER', with args beginning with: 'SLOTS' ", true),
            ("LOADING Redis is loading the dataset in memory", false),
            ("CLUSTERDOWN The cluster is down", false),
            ("MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.", false),
        ])
    func singleNodeAnswers(_ message: String, single: Bool) {
        #expect(RedisClient.meansSingleNode(message) == single)
    }

    @Test("redirections are read from error replies; anything else is not one")
    func redirections() {
        #expect(
            RedisRedirection(.error("MOVED 3999 127.0.0.1:6381")) == .moved(slot: 3999, to: RedisNodeAddress(host: "127.0.0.1", port: 6381))
        )
        #expect(RedisRedirection(.error("ASK 3999 [::1]:6381")) == .ask(slot: 3999, to: RedisNodeAddress(host: "::1", port: 6381)))
        #expect(RedisRedirection(.error("TRYAGAIN Multiple keys request during rehashing of slot")) == .tryAgain)
        #expect(RedisRedirection(.error("CLUSTERDOWN The cluster is down")) == .clusterDown)
        #expect(RedisRedirection(.error("MOVED 99999 127.0.0.1:6381")) == nil)
        #expect(RedisRedirection(.error("MOVED 1 host")) == nil)
        #expect(RedisRedirection(.error("ERR wrong number of arguments")) == nil)
        #expect(RedisRedirection(.status("MOVED 1 127.0.0.1:1")) == nil)
    }
}

@Suite("Redis Cluster: a real 3-master cluster of redis-server processes")
struct RedisClusterTests {
    @Test("one seed is enough: the client learns every master, and a binding's keys land on the master of its slot")
    func discovery() async throws {
        let cluster = try await RedisClusterProcesses.launch(masters: 3)
        defer { cluster.stop() }
        let client = RedisClient(url: RedisURL(cluster.singleSeedURLString)!, connections: 1)
        let store = RedisDeliveryStore(client: client, recordRetention: .seconds(60))
        for index in 0..<60 {
            let job = RedisDeliveryStoreTests.job("j\(index)", bindings: ["binding-\(index)"])
            try await store.record(
                Outcome(
                    job: job, target: job.targets[0], result: .delivered(providerMessageId: nil, httpStatus: 200),
                    attempts: 1, at: 1))
        }
        #expect(client.isCluster == true)
        #expect(client.clusterMasters.count == 3)
        let keysPerMaster = await cluster.keysPerMaster()
        #expect(keysPerMaster.count == 3 && keysPerMaster.allSatisfy { $0 > 0 }, "keys on every master: \(keysPerMaster)")
        #expect((30...60).contains(keysPerMaster.reduce(0, +)), "60 records in hashes of 1 024 shards: \(keysPerMaster)")
        let queue = RedisRetryQueue(client: client)
        for index in 0..<40 { try await queue.schedule(RedisRetryQueueTests.entry("\(index):job/b"), dueAt: 0) }
        let retryKeysPerMaster = await cluster.onEachMaster(["--scan", "--pattern", "push:{retry:*}:due"]).map {
            $0.split(separator: "\n").count
        }
        #expect(retryKeysPerMaster.allSatisfy { $0 > 0 }, "retry shards on every master: \(retryKeysPerMaster)")
    }

    @Test("a stale slot map is read once, however many commands need it at that moment")
    func slotMapReadOnce() async throws {
        let cluster = try await RedisClusterProcesses.launch(masters: 3)
        defer { cluster.stop() }
        let client = RedisClient(url: RedisURL(cluster.urlString)!, connections: 1)
        _ = try await client.command(RedisCommand("SET", "warm", "1"))
        #expect(client.isCluster == true)
        _ = await cluster.onEachMaster(["config", "resetstat"])
        client.markStale()
        let replies = try await withThrowingTaskGroup(of: RedisValue.self) { group in
            for index in 0..<200 { group.addTask { try await client.command(RedisCommand("SET", "key-\(index)", "v")) } }
            return try await group.reduce(into: [RedisValue]()) { $0.append($1) }
        }
        #expect(replies.count == 200 && replies.allSatisfy { $0 == .status("OK") })
        let slotReadings = await cluster.onEachMaster(["info", "commandstats"]).map { stats in
            stats.split(whereSeparator: \.isNewline)
                .first { $0.hasPrefix("cmdstat_cluster|slots:") }
                .flatMap { $0.split(separator: "=")[1].split(separator: ",").first.flatMap { Int($0) } } ?? 0
        }
        #expect(slotReadings.reduce(0, +) == 1, "CLUSTER SLOTS calls per master: \(slotReadings)")
    }

    @Test("a URL naming a node without cluster support is one node")
    func singleNodeIsNotACluster() async throws {
        let server = try await RedisServerProcess.launch()
        let client = server.client()
        #expect(try await client.command(RedisCommand("SET", "a", "1")) == .status("OK"))
        #expect(client.isCluster == false)
    }

    /// A node's cluster id.
    static func nodeID(_ port: Int) async -> String {
        await RedisClusterProcesses.run(["-p", String(port), "cluster", "myid"]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Reshards 600 slots from the first master to the second (`redis-cli --cluster reshard`), waits until the cluster
    /// serves again; returns the masters' ports, in the order used.
    static func moveFirst600Slots(of cluster: RedisClusterProcesses) async throws -> [Int] {
        let masters = await cluster.masterPorts()
        let from = await nodeID(masters[0])
        let to = await nodeID(masters[1])
        _ = await RedisClusterProcesses.run([
            "--cluster", "reshard", "127.0.0.1:\(masters[0])", "--cluster-from", from, "--cluster-to", to,
            "--cluster-slots", "600", "--cluster-yes",
        ])
        try await cluster.waitUntilServing()
        return masters
    }

    @Test("after slots move to another master, commands follow the MOVED redirection and the client's map catches up")
    func followsMovedSlots() async throws {
        let cluster = try await RedisClusterProcesses.launch(masters: 3)
        defer { cluster.stop() }
        let client = RedisClient(url: RedisURL(cluster.urlString)!, connections: 1)
        let keys = (0..<300).map { "key-\($0)" }
        _ = try await client.pipeline(keys.map { RedisCommand("SET", $0, "v-\($0)") })
        let masters = try await Self.moveFirst600Slots(of: cluster)
        let replies = try await client.pipeline(keys.map { RedisCommand("GET", $0) })
        #expect(replies.map(\.string) == keys.map { "v-\($0)" })
        _ = try await client.command(RedisCommand("GET", keys[0]))
        let fresh = RedisClient(url: RedisURL(cluster.urlString)!, connections: 1)
        _ = try await fresh.command(RedisCommand("GET", keys[0]))
        #expect(
            keys.filter { client.master(ofKey: $0) != fresh.master(ofKey: $0) }.isEmpty,
            "the client's map agrees with a newly read one")
        #expect(keys.contains { fresh.master(ofKey: $0)?.port == masters[1] && RedisKeySlot.of($0) < 600 }, "some keys moved")
    }

    @Test(
        "commands given a completion go straight to their slot's master; after their slot moved, or while it migrates, they follow the redirection"
    )
    func completionFormFollowsRedirections() async throws {
        let cluster = try await RedisClusterProcesses.launch(masters: 3)
        defer { cluster.stop() }
        let client = RedisClient(url: RedisURL(cluster.urlString)!, connections: 1)
        func run(_ commands: [RedisCommand]) async -> Result<[RedisValue], RedisError> {
            await withCheckedContinuation { continuation in client.pipeline(commands) { continuation.resume(returning: $0) } }
        }
        let keys = (0..<300).map { "completion-\($0)" }
        for key in keys { #expect(try await run([RedisCommand("SET", key, "v-\(key)")]).get() == [.status("OK")]) }
        let masters = try await Self.moveFirst600Slots(of: cluster)
        for key in keys { #expect(try await run([RedisCommand("GET", key)]).get().first?.string == "v-\(key)") }
        #expect(keys.contains { client.master(ofKey: $0)?.port == masters[1] && RedisKeySlot.of($0) < 600 }, "some keys moved")

        let key = "completion-ask"
        let source = try #require(client.master(ofKey: key))
        let target = try #require(client.clusterMasters.first { $0 != source })
        let slot = String(RedisKeySlot.of(key))
        _ = await RedisClusterProcesses.run([
            "-p", String(target.port), "cluster", "setslot", slot, "importing", await Self.nodeID(source.port),
        ])
        _ = await RedisClusterProcesses.run([
            "-p", String(source.port), "cluster", "setslot", slot, "migrating", await Self.nodeID(target.port),
        ])
        #expect(try await run([RedisCommand("SET", key, "asked")]).get() == [.status("OK")])
        let keysInSlot = await RedisClusterProcesses.run(["-p", String(target.port), "cluster", "countkeysinslot", slot])
        #expect(keysInSlot.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "the key was written on the importing master")
    }

    @Test("during a slot migration, a key not yet on the old master is reached through its ASK redirection, with ASKING")
    func followsAskRedirections() async throws {
        let cluster = try await RedisClusterProcesses.launch(masters: 3)
        defer { cluster.stop() }
        let client = RedisClient(url: RedisURL(cluster.urlString)!, connections: 1)
        _ = try await client.command(RedisCommand("SET", "warm-up", "1"))
        let key = "ask-key"
        let slot = RedisKeySlot.of(key)
        let source = try #require(client.master(ofKey: key))
        let target = try #require(client.clusterMasters.first { $0 != source })
        _ = await RedisClusterProcesses.run([
            "-p", String(target.port), "cluster", "setslot", String(slot), "importing", await Self.nodeID(source.port),
        ])
        _ = await RedisClusterProcesses.run([
            "-p", String(source.port), "cluster", "setslot", String(slot), "migrating", await Self.nodeID(target.port),
        ])
        #expect(try await client.command(RedisCommand("SET", key, "moved-in")) == .status("OK"))
        #expect(try await client.command(RedisCommand("GET", key)).string == "moved-in")
        let keysInSlot = await RedisClusterProcesses.run(["-p", String(target.port), "cluster", "countkeysinslot", String(slot)])
        #expect(keysInSlot.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "the key was written on the importing master")
        #expect(client.master(ofKey: key) == source, "ASK does not change the map: the slot still belongs to the old master")
    }

    @Test("a master killed with a replica ready: after the failover the client finds the new master by itself")
    func survivesFailover() async throws {
        let cluster = try await RedisClusterProcesses.launch(masters: 3, replicasPerMaster: 1)
        defer { cluster.stop() }
        let client = RedisClient(
            url: RedisURL(cluster.urlString)!, connections: 1, connectTimeout: .milliseconds(300),
            commandTimeout: .milliseconds(500))
        let keys = (0..<100).map { "k\($0)" }
        _ = try await client.pipeline(keys.map { RedisCommand("SET", $0, "v") })
        // Replication is asynchronous: give the replicas a moment to hold the keys before the master dies.
        try await Task.sleep(for: .seconds(1))
        let victim = await cluster.masterPorts()[0]
        cluster.nodes.first { $0.port == victim }!.stop()
        let deadline = ContinuousClock.now + .seconds(20)
        var values: [String?] = []
        while ContinuousClock.now < deadline {
            if let replies = try? await client.pipeline(keys.map { RedisCommand("GET", $0) }),
                !replies.contains(where: {
                    if case .error = $0 { true } else { false }
                })
            {
                values = replies.map(\.string)
                break
            }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(values.count == 100 && values.allSatisfy { $0 == "v" }, "every key readable from the promoted replica")
        #expect(!client.clusterMasters.contains(RedisNodeAddress(host: "127.0.0.1", port: victim)))
    }
}

import Foundation
import PushCore
import PushSandbox
import Testing
import TestSupport
@testable import PushRedis

@Suite("Durable retry hand-offs: where Redis has replicas, one has the entry before schedule returns")
struct DurableHandOffTests {
    /// A master and one replica streaming from it.
    static func replicatedServer() async throws -> (master: RedisServerProcess, replica: RedisServerProcess) {
        let master = try await RedisServerProcess.launch()
        let replica = try await RedisServerProcess.launchReplica(of: master)
        let client = master.client()
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let info = try await client.command(RedisCommand("INFO", "replication")).string ?? ""
            if RedisClient.onlineReplicas(inReplicationInfo: info) > 0 { return (master, replica) }
            try await Task.sleep(for: .milliseconds(50))
        }
        master.stop()
        replica.stop()
        throw RedisError.unavailable("the replica never came online")
    }

    @Test("a hand-off returns once the replica has the entry")
    func handOffReachesTheReplica() async throws {
        let (master, replica) = try await Self.replicatedServer()
        defer {
            master.stop()
            replica.stop()
        }
        let queue = RedisRetryQueue(client: master.client(), replicationTimeout: .milliseconds(500))
        try await queue.schedule(RedisRetryQueueTests.entry("r1"), dueAt: 0)
        let onReplica = try await replica.client().command(
            RedisCommand("HGET", RedisKeys.retryEntry("r1", shard: RedisRetryQueue.shard(of: "r1")), "job"))
        #expect(onReplica.string == #"{"v":1}"#)
    }

    @Test("with the replica frozen (SIGSTOP), a hand-off throws once the wait is over instead of reporting it done")
    func frozenReplicaFailsTheHandOff() async throws {
        let (master, replica) = try await Self.replicatedServer()
        defer {
            master.stop()
            replica.stop()
        }
        let queue = RedisRetryQueue(client: master.client(), replicationTimeout: .milliseconds(300))
        try await queue.schedule(RedisRetryQueueTests.entry("before"), dueAt: 0)
        replica.pause()
        defer { replica.resume() }
        let started = ContinuousClock.now
        await #expect(throws: ReplicationShortfall.self) { try await queue.schedule(RedisRetryQueueTests.entry("r1"), dueAt: 0) }
        #expect(ContinuousClock.now - started >= .milliseconds(300), "it waited for the replica first")
    }

    @Test("a node without replicas is not waited for")
    func noReplicaNoWait() async throws {
        let server = try await RedisServerProcess.launch()
        defer { server.stop() }
        // WAIT 1 on a node without replicas would block for the whole timeout and then throw.
        let queue = RedisRetryQueue(client: server.client(), replicationTimeout: .seconds(10))
        try await queue.schedule(RedisRetryQueueTests.entry("r1"), dueAt: 0)
        #expect(try await queue.count() == 1)
    }

    @Test("on a Redis Cluster each hand-off waits on the master that owns its shard")
    func clusterWaitsOnTheOwningMaster() async throws {
        let cluster = try await RedisClusterProcesses.launch(masters: 3, replicasPerMaster: 1)
        defer { cluster.stop() }
        let queue = RedisRetryQueue(
            client: RedisClient(
                url: RedisURL(cluster.urlString)!, connections: 1,
                connectTimeout: .milliseconds(500), commandTimeout: .seconds(2)),
            replicationTimeout: .seconds(1))
        // Loaded everywhere first: a NOSCRIPT answer would send the script again, with a WAIT of its own.
        _ = await cluster.onEachMaster(["script", "load", RedisRetryQueue.scheduleScript.source])
        _ = await cluster.onEachMaster(["config", "resetstat"])
        for index in 0..<48 { try await queue.schedule(RedisRetryQueueTests.entry("\(index):job/b"), dueAt: 0) }
        let waits = await cluster.onEachMaster(["info", "commandstats"]).map { stats in
            stats.split(whereSeparator: \.isNewline).first { $0.hasPrefix("cmdstat_wait:") }
                .flatMap { $0.split(separator: "=").dropFirst().first?.split(separator: ",").first }.flatMap { Int($0) } ?? 0
        }
        let entries = await cluster.onEachMaster(["--scan", "--pattern", "push:{retry:*}:entry:*"]).map {
            $0.split(whereSeparator: \.isNewline).count
        }
        let stats = await cluster.onEachMaster(["info", "commandstats"])
        #expect(waits == entries, "WAITs per master \(waits), entries per master \(entries): \(stats)")
        #expect(entries.reduce(0, +) == 48)
    }
}

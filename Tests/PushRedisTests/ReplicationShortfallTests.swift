import Foundation
import PushCore
import PushSandbox
import Testing
import TestSupport
@testable import PushRedis

@Suite("Replication shortfalls: a write or a found entry no replica acknowledged is reported as such, never as durable")
struct ReplicationShortfallTests {
    @Test("a hand-off no replica acknowledges in time throws a replication shortfall, and the entry is on the primary")
    func handOffFallsShort() async throws {
        let (master, replica) = try await DurableHandOffTests.replicatedServer()
        defer {
            master.stop()
            replica.stop()
        }
        let queue = RedisRetryQueue(client: master.client(), replicationTimeout: .milliseconds(200))
        replica.pause()
        defer { replica.resume() }
        await #expect(throws: ReplicationShortfall.self) { try await queue.schedule(RedisRetryQueueTests.entry("r1"), dueAt: 0) }
        #expect(try await queue.count() == 1, "the write ran on the primary: only its replication fell short")
    }

    @Test(
        "a durable write whose master stops answering fails as unavailable once the command timeout passes, never left waiting",
        .timeLimit(.minutes(1)))
    func durableWriteOnAFrozenMaster() async throws {
        let (master, replica) = try await DurableHandOffTests.replicatedServer()
        defer {
            master.resume()
            master.stop()
            replica.stop()
        }
        let client = master.client()
        let script = RedisScript("return redis.call('SET', KEYS[1], ARGV[1])")
        _ = try await client.evaluateReplicated(script, keys: ["{d}k"], arguments: [Array("1".utf8)], timeout: .milliseconds(200))
        master.pause()
        do {
            _ = try await client.evaluateReplicated(script, keys: ["{d}k"], arguments: [Array("2".utf8)], timeout: .milliseconds(200))
            Issue.record("a frozen master acknowledged a write")
        } catch {
            guard case .unavailable = error else {
                Issue.record("expected unavailable, got \(error)")
                return
            }
        }
    }

    @Test("an entry another connection wrote is confirmed only once a replica acknowledged it")
    func confirmWaitsForTheReplica() async throws {
        let (master, replica) = try await DurableHandOffTests.replicatedServer()
        defer {
            master.stop()
            replica.stop()
        }
        replica.pause()
        let writer = RedisRetryQueue(client: master.client(), replicationTimeout: .milliseconds(200))
        await #expect(throws: ReplicationShortfall.self) { try await writer.schedule(RedisRetryQueueTests.entry("r1"), dueAt: 0) }
        // A connection that never wrote the entry: a WAIT after a plain read would have nothing of its own to wait for.
        let reader = RedisRetryQueue(client: master.client(), replicationTimeout: .milliseconds(200))
        await #expect(throws: ReplicationShortfall.self) { try await reader.confirm("r1") }
        replica.resume()
        #expect(try await reader.confirm("r1"))
        #expect(try await reader.confirm("absent") == false)
    }

    @Test("a redelivery trusts the retry entry it finds only once a replica has it")
    func redeliveryConfirmsTheEntry() async throws {
        let (master, replica) = try await DurableHandOffTests.replicatedServer()
        defer {
            master.stop()
            replica.stop()
        }
        let job = RedisDeliveryStoreTests.job("j1", kind: .message)
        let entryId = RetryEntry.id(jobId: "j1", bindingId: "b1")
        replica.pause()
        let queue = RedisRetryQueue(client: master.client(), replicationTimeout: .milliseconds(200))
        await #expect(throws: ReplicationShortfall.self) { try await queue.schedule(RedisRetryQueueTests.entry(entryId), dueAt: 0) }
        let store = RedisDeliveryStore(client: master.client(), recordRetention: .seconds(60), replicationTimeout: .milliseconds(200))
        await #expect(throws: ReplicationShortfall.self, "the entry exists on the primary only") {
            try await store.prepare(job, dedupeWindow: 0, firstDelivery: false)
        }
        replica.resume()
        #expect(try await store.prepare(job, dedupeWindow: 0, firstDelivery: false) == [.inRetryQueue])
    }
}

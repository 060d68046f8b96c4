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

import Testing

@testable import PushPipeline

/// Registering the waits of jobs whose slots are reserved outside the pipeline's lock: a reservation's notices
/// may come before its wait is registered, and late ones after it ended.
@Suite("Slot waits")
struct SlotWaitsTests {
    /// Job ids, waits (the job's name) and slots (a number) as plain values.
    typealias Waits = SlotWaits<Int, String, Int>

    @Test("a reservation that waits for its app's slot parks its job; the grant starts it with the slot")
    func waitForAppThenGrant() {
        var waits = Waits()
        waits.reserve(1)
        #expect(isWaitingForApp(waits.register(1, "job 1", forEndpoint: false)))
        #expect(waits.count == 1)
        #expect(isUnpark(waits.notice(.appSlotGranted, for: 1)))
        #expect(started(waits.notice(.granted(7), for: 1)) == "job 1 with slot 7")
        #expect(waits.count == 0)
    }

    @Test("a reservation that waits for its endpoint's slot only is in flight, not parked")
    func waitForEndpoint() {
        var waits = Waits()
        waits.reserve(1)
        #expect(isWaitingForEndpoint(waits.register(1, "job 1", forEndpoint: true)))
        #expect(started(waits.notice(.granted(3), for: 1)) == "job 1 with slot 3")
    }

    @Test("a grant that comes before the wait is registered starts the job at registration, and registers nothing")
    func grantBeforeRegistration() {
        var waits = Waits()
        waits.reserve(1)
        #expect(isNone(waits.notice(.appSlotGranted, for: 1)))
        #expect(isNone(waits.notice(.granted(5), for: 1)))
        #expect(granted(waits.register(1, "job 1", forEndpoint: false)) == 5)
        #expect(waits.count == 0)
    }

    @Test("an app slot granted before registration: the job waits for its endpoint, in flight, never parked")
    func appSlotBeforeRegistration() {
        var waits = Waits()
        waits.reserve(1)
        #expect(isNone(waits.notice(.appSlotGranted, for: 1)))
        #expect(isWaitingForEndpoint(waits.register(1, "job 1", forEndpoint: false)))
        #expect(started(waits.notice(.granted(2), for: 1)) == "job 1 with slot 2")
    }

    @Test("an app-slot notice that arrives after the grant (from another thread) changes nothing")
    func lateAppSlotNotice() {
        var waits = Waits()
        waits.reserve(1)
        #expect(isNone(waits.notice(.granted(4), for: 1)))
        #expect(isNone(waits.notice(.appSlotGranted, for: 1)))
        #expect(granted(waits.register(1, "job 1", forEndpoint: false)) == 4)
        #expect(isNone(waits.notice(.appSlotGranted, for: 1)))
        waits.reserve(2)
        _ = waits.register(2, "job 2", forEndpoint: false)
        #expect(started(waits.notice(.granted(6), for: 2)) == "job 2 with slot 6")
        #expect(isNone(waits.notice(.appSlotGranted, for: 2)))
    }

    @Test("a grant for a job with no wait and no reservation under way hands its slot back instead of holding it")
    func unclaimedGrantGivesBack() {
        var waits = Waits()
        if case .giveBack(let slot) = waits.notice(.granted(9), for: 1) {
            #expect(slot == 9)
        } else {
            Issue.record("the grant's slot was not handed back")
        }
    }

    @Test("a reservation granted at once leaves nothing behind")
    func grantedAtOnce() {
        var waits = Waits()
        waits.reserve(1)
        waits.grantedAtOnce(1)
        #expect(waits.count == 0)
        #expect(isNone(waits.notice(.appSlotGranted, for: 1)))
    }

    @Test("withdrawn waits are gone; the others stay, and can be selected")
    func withdrawing() {
        var waits = Waits()
        for id in 1...3 {
            waits.reserve(id)
            _ = waits.register(id, "job \(id)", forEndpoint: false)
        }
        #expect(Set(waits.waits { id, _ in id >= 2 }.keys) == [2, 3])
        waits.withdrawn([2, 3])
        #expect(waits.count == 1)
        #expect(waits.waits { _, _ in true }.keys.sorted() == [1])
    }

    private func isWaitingForApp(_ registration: Waits.Registration) -> Bool {
        if case .waitingForApp = registration { true } else { false }
    }

    private func isWaitingForEndpoint(_ registration: Waits.Registration) -> Bool {
        if case .waitingForEndpoint = registration { true } else { false }
    }

    private func granted(_ registration: Waits.Registration) -> Int? {
        if case .granted(let slot) = registration { slot } else { nil }
    }

    private func isUnpark(_ action: Waits.Action) -> Bool {
        if case .unpark = action { true } else { false }
    }

    private func isNone(_ action: Waits.Action) -> Bool {
        if case .none = action { true } else { false }
    }

    /// The started job and its slot, as "<job> with slot <n>".
    private func started(_ action: Waits.Action) -> String? {
        if case .start(let wait, let slot) = action { "\(wait) with slot \(slot)" } else { nil }
    }
}

import Testing
@testable import PushCore

@Suite("Notification and Job are values, whatever they store out of line")
struct NotificationValueTests {
    @Test("a field set on a copy leaves the original unchanged")
    func copiesAreIndependent() {
        let original = Notification(title: "Bob", threadId: "chat-1", locArgs: ["Alice"])
        var copy = original
        copy.threadId = "chat-2"
        copy.category = "MESSAGE"
        copy.locArgs?.append("Carol")
        #expect(original.threadId == "chat-1")
        #expect(original.category == nil)
        #expect(original.locArgs == ["Alice"])
        #expect(copy.threadId == "chat-2")
        #expect(copy.category == "MESSAGE")
        #expect(copy.locArgs == ["Alice", "Carol"])
    }

    @Test("equality is by content: set and cleared again equals never set, field by field as in the initializer")
    func equalityByContent() {
        var cleared = Notification(title: "Bob")
        cleared.subtitle = "lunch"
        cleared.mutableContent = true
        #expect(cleared != Notification(title: "Bob"))
        cleared.subtitle = nil
        cleared.mutableContent = nil
        #expect(cleared == Notification(title: "Bob"))

        var fieldByField = Notification()
        fieldByField.title = "Bob"
        fieldByField.interruptionLevel = .timeSensitive
        fieldByField.relevanceScore = 0.5
        fieldByField.clickAction = "OPEN_CHAT"
        #expect(
            fieldByField == Notification(title: "Bob", interruptionLevel: .timeSensitive, relevanceScore: 0.5, clickAction: "OPEN_CHAT"))
        #expect(
            fieldByField != Notification(title: "Bob", interruptionLevel: .timeSensitive, relevanceScore: 0.6, clickAction: "OPEN_CHAT"))
    }

    @Test("a job's live activity reads back as set, and a changed copy leaves the original unchanged")
    func liveActivityIsAValue() {
        let activity = LiveActivity(event: .update, contentState: .object([(key: "score", value: .integer(1))]), staleDate: 1_800_000_000)
        let original = Job(
            id: "j1", createdAt: 0, ttl: 60, kind: .custom, priority: .normal, userId: "u1", liveActivity: activity,
            targets: [Target(bindingId: "b1", provider: "apns")])
        var copy = original
        copy.liveActivity?.event = .end
        #expect(original.liveActivity == activity)
        #expect(copy.liveActivity?.event == .end)
        copy.liveActivity = nil
        #expect(copy.liveActivity == nil)
        #expect(original != copy)
    }
}

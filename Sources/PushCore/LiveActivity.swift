/// A Live Activity push (the job's `liveActivity`, contract v1): starts, updates or ends an activity the
/// app shows on the lock screen, for targets whose push type is `liveactivity`. Dates are seconds since
/// the epoch.
public struct LiveActivity: Sendable, Equatable {
    public enum Event: String, Sendable, CaseIterable {
        case start, update, end
    }

    public var event: Event
    /// The activity's dynamic content, as the app's `ContentState` decodes it.
    public var contentState: JSONValue
    /// When this content was current; a device ignores an update older than the one it shows.
    /// Default: the job's `createdAt`.
    public var timestamp: Int64?
    public var staleDate: Int64?
    public var dismissalDate: Int64?
    /// The app's attributes type name; required to start an activity.
    public var attributesType: String?
    /// The activity's static attributes; required to start an activity.
    public var attributes: JSONValue?
    /// Whether a `start` asks the device for the new activity's update token (`aps.input-push-token: 1`), so the
    /// activity can then be updated and ended by push. nil: yes. Only a start asks; on update and end it is ignored.
    public var inputPushToken: Bool?

    public init(
        event: Event, contentState: JSONValue, timestamp: Int64? = nil, staleDate: Int64? = nil,
        dismissalDate: Int64? = nil, attributesType: String? = nil, attributes: JSONValue? = nil, inputPushToken: Bool? = nil
    ) {
        self.event = event
        self.contentState = contentState
        self.timestamp = timestamp
        self.staleDate = staleDate
        self.dismissalDate = dismissalDate
        self.attributesType = attributesType
        self.attributes = attributes
        self.inputPushToken = inputPushToken
    }

    /// The push asks for an update token: a start, unless the job said `inputPushToken: false`.
    public var asksForUpdateToken: Bool { event == .start && inputPushToken != false }

    /// Latest date accepted (9999-12-31T23:59:59Z): later numbers are mistakes, and keep arithmetic far from overflow.
    public static let latestDate: Int64 = 253_402_300_799
}

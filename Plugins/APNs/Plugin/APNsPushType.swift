import PushCore

/// The `apns-push-type` values and the rules Apple attaches to each.
public enum APNsPushType: String, Sendable, CaseIterable {
    /// User-visible alert, badge or sound. Topic: the bundle id.
    case alert
    /// Silent content update. Topic: the bundle id. Priority must be 5 (10 is an error).
    case background
    /// Location query (token auth only). Topic: bundle id + `.location-query`.
    case location
    /// PushKit VoIP call invitation. Topic: bundle id + `.voip`. Payload up to 5120 bytes.
    case voip
    /// watchOS complication update. Topic: bundle id + `.complication`.
    case complication
    /// File Provider change. Topic: bundle id + `.pushkit.fileprovider`.
    case fileprovider
    /// MDM wake-up. Topic: the MDM certificate's topic (configure it as the topic override).
    case mdm
    /// Live Activity update. Topic: bundle id + `.push-type.liveactivity`.
    case liveactivity
    /// Push to Talk. Topic: bundle id + `.voip-ptt`.
    case pushtotalk
    /// Widget reload. Topic: bundle id + `.push-type.widgets`.
    case widgets
    /// Control Center control reload. Topic: bundle id + `.push-type.controls`.
    case controls

    public var topicSuffix: String {
        switch self {
        case .alert, .background, .mdm: ""
        case .location: ".location-query"
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .liveactivity: ".push-type.liveactivity"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        }
    }

    /// Largest payload APNs accepts for this type, in bytes.
    public var payloadLimit: Int { self == .voip ? 5120 : 4096 }

    /// Apple serves these over token-based connections only: `location` ("Sending notification requests to
    /// APNs", `apns-push-type`), `liveactivity` (ActivityKit, "Starting and updating Live Activities with
    /// ActivityKit push notifications": "establish a token-based connection to APNs"), `widgets` and
    /// `controls` (WidgetKit, "Updating widgets with WidgetKit push notifications", likewise).
    public var needsTokenAuthentication: Bool {
        switch self {
        case .location, .liveactivity, .widgets, .controls: true
        default: false
        }
    }

    /// The type a job kind takes when the binding names none: call → voip, cancel → the app's cancel type
    /// (alert by default, as the Mizu seed's `pushnotification_apnspushtype`), message and custom → alert,
    /// wake → background. An alert that shows nothing (no title, body, sound or badge) is a background
    /// push: Apple's "Pushing background updates to your App" asks for push type background, priority 5
    /// and `content-available: 1` for a push that only delivers data.
    public static func byKind(
        _ kind: JobKind, cancel: APNsPushType = APNsApp.defaultCancelPushType,
        hasVisibleNotification: Bool = true
    ) -> APNsPushType {
        let resolved: APNsPushType =
            switch kind {
            case .call: .voip
            case .cancel: cancel
            case .message, .custom: .alert
            case .wake: .background
            }
        return resolved == .alert && !hasVisibleNotification ? .background : resolved
    }

    /// `apns-priority`: background is always 5; VoIP calls always 10 (they must ring now); a Push to Talk
    /// transmission always 10 (PushToTalk, "Creating a Push to Talk app": "Set the APNs priority to 10 to request
    /// immediate delivery"); others, Push to Talk service updates included, 10 for high-priority jobs and 5 for
    /// normal ones. A service update (`aps.ptt-push-type: service-update`) at 10 counts against a budget of six an
    /// hour, one at 5 or below against none (PushToTalk, `incomingServiceUpdatePush(…remainingHighPriorityBudget:…)`:
    /// "Use low-priority push notifications (priority <= 5) whenever possible, as they aren't subject to a budget
    /// limit").
    public func priority(for jobPriority: JobPriority, serviceUpdate: Bool = false) -> Int {
        switch self {
        case .background: 5
        case .voip: 10
        case .pushtotalk where !serviceUpdate: 10
        default: jobPriority == .high ? 10 : 5
        }
    }

    /// Push to Talk pushes carry `apns-expiration: 0` whatever the job's TTL (PushToTalk: "set an
    /// expiration of 0", so a late transmission is never delivered).
    public var expiresAtOnce: Bool { self == .pushtotalk }
}

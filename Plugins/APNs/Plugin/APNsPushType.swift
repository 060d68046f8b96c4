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

    /// The type for a target: its own `pushType` (an RFC 8599 binding's service), else by job
    /// kind — call → voip, cancel → the app's cancel type (alert by default, as the Mizu seed's
    /// `pushnotification_apnspushtype`), message and custom → alert, wake → background.
    /// An alert that shows nothing (no title, body, sound or badge) is a background push: Apple's
    /// "Pushing background updates to your App" asks for push type background, priority 5 and
    /// `content-available: 1` for a push that only delivers data.
    public static func resolve(kind: JobKind, target: Target, cancel: APNsPushType = APNsApp.defaultCancelPushType,
                               hasVisibleNotification: Bool = true) -> APNsPushType {
        let resolved: APNsPushType
        if let name = target.details(APNsTarget.self)?.pushType, let explicit = APNsPushType(rawValue: name) {
            resolved = explicit
        } else {
            switch kind {
            case .call: resolved = .voip
            case .cancel: resolved = cancel
            case .message, .custom: resolved = .alert
            case .wake: resolved = .background
            }
        }
        return resolved == .alert && !hasVisibleNotification ? .background : resolved
    }

    /// `apns-priority`: background is always 5; VoIP calls always 10 (they must ring now);
    /// others 10 for high-priority jobs, 5 for normal ones.
    public func priority(for jobPriority: JobPriority) -> Int {
        switch self {
        case .background: 5
        case .voip: 10
        default: jobPriority == .high ? 10 : 5
        }
    }
}

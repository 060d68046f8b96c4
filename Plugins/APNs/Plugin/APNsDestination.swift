import PushCore

/// The device token a delivery goes to and the push type it goes as: one place for the binding rules.
///
/// - A PushKit token (an RFC 8599 `voip` binding, or an X-MPUSH `i:` token of an app that declares them PushKit
///   tokens) takes VoIP pushes only: a call, or a cancel of an app whose cancel type is `voip` (its PushKit handler
///   reports and ends the call). Anything else is not sent. PushKit, `PKPushRegistry`: VoIP pushes are for
///   incoming calls, and since iOS 13 an app that does not report one to CallKit is terminated and, repeatedly,
///   no longer launched for VoIP pushes; a PushKit token is not valid for the app's other topics either.
/// - A dual binding (RFC 8599 `voip&remote`, as Linphone registers) sends what goes as `voip` to its PushKit token
///   on the `.voip` topic and everything else to its remote token, by the job's kind.
/// - A binding that names another push type (`voip-ptt`, `complication`, a native target's `pushType`) gets it.
/// - Otherwise the job's kind decides (`APNsPushType.byKind`).
struct APNsDestination: Equatable {
    var token: String
    var pushType: APNsPushType

    enum Refusal: Error, Equatable {
        /// The binding's token is a PushKit token and this push would go as `pushType`.
        case notForPushKitToken(APNsPushType, notation: SIPBinding.Notation?)
    }

    static func resolve(_ delivery: Delivery, app: APNsApp) throws(Refusal) -> APNsDestination {
        let job = delivery.job
        let details = delivery.target.details(APNsTarget.self)
        let token = details?.token ?? ""
        let byKind = APNsPushType.byKind(job.kind, cancel: app.cancelPushType, hasVisibleNotification: job.hasVisibleNotification)
        if let voipToken = details?.voipToken {
            return byKind == .voip ? APNsDestination(token: voipToken, pushType: .voip) : APNsDestination(token: token, pushType: byKind)
        }
        let named = details?.pushType.flatMap(APNsPushType.init(rawValue:))
        let pushKitToken = named == .voip || (app.xmpushTokensArePushKit && details?.notation == .xmpush && named == nil)
        if pushKitToken {
            guard byKind == .voip else { throw .notForPushKitToken(byKind, notation: details?.notation) }
            return APNsDestination(token: token, pushType: .voip)
        }
        return APNsDestination(token: token, pushType: named ?? byKind)
    }
}

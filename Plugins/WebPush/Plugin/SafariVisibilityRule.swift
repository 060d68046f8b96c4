import PushCore

/// Safari shows every push or loses it: Apple's push service for Safari and Home Screen web apps
/// (`web.push.apple.com`, any host under `push.apple.com`) serves subscriptions made with `userVisibleOnly: true`,
/// and "Safari doesn't support invisible push notifications … If you don't display a notification, Safari revokes
/// the push permission for your site" (Apple, "Sending web push notifications in web apps and browsers"). A push
/// with nothing to show — a cancel or a wake-up, which the service worker handles silently, or a message or custom
/// push whose notification has no title, subtitle or body — is never sent there: one would cost the site its
/// permission for every later push. A call goes: the service worker shows the incoming call.
enum SafariVisibilityRule {
    /// Apple's Web Push hosts: WebKit's "Meet Web Push" asks servers to "allow URLs from any subdomain of push.apple.com".
    static func isApple(endpoint: String) -> Bool {
        guard endpoint.hasPrefix("https://") else { return false }
        let authority = endpoint.dropFirst("https://".count).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = (authority.split(separator: "@").last ?? "").prefix { $0 != ":" }.lowercased()
        return host == "push.apple.com" || host.hasSuffix(".push.apple.com")
    }

    /// Whether the push shows nothing: a cancel or a wake-up always, a message or custom push without text.
    static func showsNothing(_ job: Job) -> Bool {
        switch job.kind {
        case .cancel, .wake: true
        case .message, .custom: !(job.notification?.hasText ?? false)
        case .call: false
        }
    }

    /// The refusal for a push Safari would not show, nil when it may be sent.
    static func refusal(_ delivery: Delivery) -> DeliveryResult? {
        let job = delivery.job
        guard showsNothing(job), let endpoint = delivery.target.details(WebPushTarget.self)?.endpoint, isApple(endpoint: endpoint)
        else { return nil }
        let what =
            job.kind == .cancel || job.kind == .wake ? "a \(job.kind.rawValue)" : "a \(job.kind.rawValue) without a notification to show"
        return .failed(
            reason: "\(what) shows nothing, and Safari revokes the push permission of a site that sends pushes "
                + "it does not show; not sent to Apple's push service", httpStatus: nil)
    }
}

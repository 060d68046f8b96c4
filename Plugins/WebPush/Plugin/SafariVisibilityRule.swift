import PushCore

/// Safari shows every push or loses it: Apple's push service for Safari and Home Screen web apps
/// (`web.push.apple.com`, any host under `push.apple.com`) serves subscriptions made with `userVisibleOnly: true`,
/// and "Safari doesn't support invisible push notifications … If you don't display a notification, Safari revokes
/// the push permission for your site" (Apple, "Sending web push notifications in web apps and browsers"). A cancel
/// or a wake-up is handled by the service worker without showing anything, so to Safari it is never sent: one would
/// cost the site its permission for every later push.
enum SafariVisibilityRule {
    /// Apple's Web Push hosts: WebKit's "Meet Web Push" asks servers to "allow URLs from any subdomain of push.apple.com".
    static func isApple(endpoint: String) -> Bool {
        guard endpoint.hasPrefix("https://") else { return false }
        let authority = endpoint.dropFirst("https://".count).prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        let host = (authority.split(separator: "@").last ?? "").prefix { $0 != ":" }.lowercased()
        return host == "push.apple.com" || host.hasSuffix(".push.apple.com")
    }

    /// The refusal for a push Safari would not show, nil when it may be sent.
    static func refusal(_ delivery: Delivery) -> DeliveryResult? {
        let kind = delivery.job.kind
        guard kind == .cancel || kind == .wake, let endpoint = delivery.target.details(WebPushTarget.self)?.endpoint,
            isApple(endpoint: endpoint)
        else { return nil }
        return .failed(
            reason: "a \(kind.rawValue) shows nothing, and Safari revokes the push permission of a site that sends pushes "
                + "it does not show; not sent to Apple's push service", httpStatus: nil)
    }
}

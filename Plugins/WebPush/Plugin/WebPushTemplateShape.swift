import PushCore

/// Web Push templates render the message the service worker receives (before encryption): a JSON object,
/// at most `WebPushRequest.largestPlaintext` bytes. What the page does with it is the page's business.
struct WebPushTemplateShape: TemplateShape {
    let provider = ProviderID.webpush

    func problem(in document: JSONValue) -> String? {
        guard case .object = document else { return "must render a JSON object, not \(document.typeName)" }
        return nil
    }

    func sampleTarget(app: String) -> Target {
        Target(
            bindingId: "template-check", provider: .webpush, app: app,
            details: WebPushTarget(endpoint: "https://push.example.net/send/sample", keys: WebPushKeys(p256dh: "sample", auth: "sample")))
    }
}

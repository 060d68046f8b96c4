import PushCore

/// APNs templates render the payload object, with an `aps` object; a top-level `headers` object, as in
/// Mizu's pushkitmessage.txt, is allowed and never sent (headers follow the binding rules).
struct APNsTemplateShape: TemplateShape {
    let provider = ProviderID.apns

    func problem(in document: JSONValue) -> String? {
        guard case .object = document else { return "must render a JSON object, not \(document.typeName)" }
        guard case .object? = document["aps"] else { return "an APNs payload needs an \"aps\" object" }
        if let headers = document["headers"], headers.typeName != "object" { return "\"headers\" must be an object" }
        return nil
    }

    func sampleTarget(app: String) -> Target { .apns("template-check", app: app, token: String(repeating: "ab", count: 32)) }
}

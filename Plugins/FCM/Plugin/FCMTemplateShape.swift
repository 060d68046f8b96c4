import PushCore

/// FCM templates render the whole `messages:send` body, `{"message": {"token": "…", …}}`.
struct FCMTemplateShape: TemplateShape {
    let provider = ProviderID.fcm

    func problem(in document: JSONValue) -> String? {
        guard case .object = document else { return "must render a JSON object, not \(document.typeName)" }
        guard let message = document["message"], case .object = message else {
            return "an FCM body needs a \"message\" object ({\"message\": {\"token\": …}})"
        }
        guard case .string(let token)? = message["token"], !token.isEmpty else {
            return "message.token must be a non-empty string ({{TOKEN}})"
        }
        if let other = message["data"], case .object(let members) = other,
            let bad = members.first(where: { if case .string = $0.value { false } else { true } })
        {
            return "message.data.\(bad.key) must be a string (FCM data values are strings)"
        }
        return nil
    }

    func sampleTarget(app: String) -> Target { .fcm("template-check", app: app, token: "token:\"sample\"") }
}

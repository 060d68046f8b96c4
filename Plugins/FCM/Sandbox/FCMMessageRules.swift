import PushCore

/// The message checks the sandbox makes on `message.notification` and `message.android.notification`, as
/// Firebase's `Message` REST reference gives their fields (`Notification`, `AndroidNotification`): an
/// unknown name or a value of the wrong type is answered 400 INVALID_ARGUMENT, the way the proto-JSON
/// parser answers it.
enum FCMMessageRules {
    enum Kind { case string, integer, boolean, stringArray, color, object }

    static let notification: [String: Kind] = ["title": .string, "body": .string, "image": .string]
    static let androidNotification: [String: Kind] = [
        "title": .string, "body": .string, "icon": .string, "color": .color, "sound": .string, "tag": .string,
        "click_action": .string, "body_loc_key": .string, "body_loc_args": .stringArray, "title_loc_key": .string,
        "title_loc_args": .stringArray, "channel_id": .string, "ticker": .string, "sticky": .boolean,
        "event_time": .string, "local_only": .boolean, "notification_priority": .string, "default_sound": .boolean,
        "default_vibrate_timings": .boolean, "default_light_settings": .boolean, "visibility": .string,
        "notification_count": .integer, "image": .string, "vibrate_timings": .stringArray, "light_settings": .object,
        "proxy": .string, "bypass_proxy_notification": .boolean,
    ]

    /// `AndroidConfig.priority`: the REST enum AndroidMessagePriority is `NORMAL` or `HIGH` (Firebase's REST reference);
    /// Firebase's own guides send `normal` and `high`, which FCM accepts too.
    static let androidPriorities: [JSONValue] = [.string("NORMAL"), .string("HIGH"), .string("normal"), .string("high")]

    /// "About FCM messages": "Maximum payload for both message types is 4096 bytes"; notification messages have "a
    /// predefined set of user-visible keys", data messages "only your user-defined custom key-value pairs".
    static let largestPayloadBytes = 4096

    /// The payload Firebase's limit is about: the compact JSON of `message.data` and of the user-visible keys
    /// (`message.notification`, `message.android.notification`). Token, platform headers, TTL and priority are not
    /// payload. Firebase does not say how it counts; the JSON of those members is at least what it carries.
    static func payloadBytes(of message: JSONValue) -> Int {
        [message["data"], message["notification"], message["android"]?["notification"]]
            .compactMap { $0 }.reduce(0) { total, member in
                var writer = JSONWriter()
                writer.value(member)
                return total + writer.bytes.count
            }
    }

    /// The first violation as FCM words it, nil when the message passes.
    static func problem(in message: JSONValue) -> String? {
        if let notification = message["notification"],
            let problem = problem(notification, fields: Self.notification, at: "message.notification")
        {
            return problem
        }
        if let android = message["android"]?["notification"],
            let problem = problem(android, fields: androidNotification, at: "message.android.notification")
        {
            return problem
        }
        return nil
    }

    static func problem(_ object: JSONValue, fields: [String: Kind], at path: String) -> String? {
        guard case .object(let members) = object else {
            return "Invalid value at '\(path)' (type.googleapis.com/google.firebase.fcm.v1.\(path))"
        }
        for (name, value) in members {
            guard let kind = fields[name] else {
                return "Invalid JSON payload received. Unknown name \"\(name)\" at '\(path)': Cannot find field."
            }
            guard matches(value, kind) else { return "Invalid value at '\(path).\(name)'" }
        }
        return nil
    }

    static func matches(_ value: JSONValue, _ kind: Kind) -> Bool {
        switch (kind, value) {
        case (.string, .string), (.integer, .integer), (.boolean, .bool), (.object, .object): return true
        case (.stringArray, .array(let elements)): return elements.allSatisfy { if case .string = $0 { true } else { false } }
        case (.color, .string(let text)):
            // AndroidNotification.color: "in #rrggbb format".
            let bytes = Array(text.utf8)
            return bytes.count == 7 && bytes[0] == UInt8(ascii: "#") && bytes.dropFirst().allSatisfy(\.isHexDigit)
        default: return false
        }
    }
}

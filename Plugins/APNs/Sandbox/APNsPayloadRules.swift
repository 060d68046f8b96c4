import PushCore

/// What makes a device drop a push APNs accepted, as Apple documents the keys ("Generating a remote notification",
/// the payload key reference; "Pushing background updates to your App"; ActivityKit, "Starting and updating Live
/// Activities with ActivityKit push notifications"; WidgetKit, "Updating widgets with WidgetKit push notifications";
/// PushToTalk, "Creating a Push to Talk app"). APNs itself answers none of these with an error (Apple documents no
/// reason for them), so the sandbox answers 200 and records the problem.
enum APNsPayloadRules {
    static let interruptionLevels: Set<String> = ["passive", "active", "time-sensitive", "critical"]
    static let liveActivityEvents: Set<String> = ["start", "update", "end"]

    /// PushToTalk: a transmission needs "the APNs priority to 10 … and … an expiration of 0" ("Creating a Push to Talk
    /// app"). A service update (`aps.ptt-push-type: service-update`) may go at any priority APNs takes: one at 10 counts
    /// against a budget of six an hour, one at 5 or below against none (`incomingServiceUpdatePush`, "Use low-priority
    /// push notifications (priority <= 5) whenever possible"); Apple sets it no expiration.
    static func headerProblem(pushType: String, priority: String, expiration: String?, body: [UInt8]) -> String? {
        guard pushType == "pushtotalk", !isPushToTalkServiceUpdate(body) else { return nil }
        return priority == "10" && expiration == "0" ? nil : "pushtotalk needs apns-priority 10 and apns-expiration 0"
    }

    /// The device reads `aps.ptt-push-type: service-update` as a service update (Apple's developer forum thread 787878).
    static func isPushToTalkServiceUpdate(_ body: [UInt8]) -> Bool {
        (try? JSONParser.parse(body))?["aps"]?["ptt-push-type"] == .string("service-update")
    }

    /// What is wrong with the payload, nil when nothing is.
    static func problem(in body: [UInt8], pushType: String) -> String? {
        guard let payload = try? JSONParser.parse(body), case .object = payload else { return "the payload is not a JSON object" }
        return problem(in: payload, pushType: pushType)
    }

    /// What is wrong with `aps`, nil when nothing is.
    static func problem(in payload: JSONValue, pushType: String) -> String? {
        guard let aps = payload["aps"] else { return pushType == "liveactivity" ? "liveactivity payload without aps" : nil }
        guard case .object(let members) = aps else { return "aps must be a dictionary" }
        if pushType == "widgets" || pushType == "controls" {
            return members.count == 1 && aps["content-changed"] == .bool(true)
                ? nil : "a \(pushType) push's aps must be {\"content-changed\": true}"
        }
        if pushType == "background", members.contains(where: { ["alert", "sound", "badge"].contains($0.key) }) {
            return "a background push carries no alert, sound or badge"
        }
        if let level = aps["interruption-level"], !(string(level).map(interruptionLevels.contains) ?? false) {
            return "interruption-level must be passive, active, time-sensitive or critical"
        }
        if let score = aps["relevance-score"], !(number(score).map { (0...1).contains($0) } ?? false) {
            return "relevance-score must be a number between 0 and 1"
        }
        if let sound = aps["sound"], let problem = soundProblem(sound) { return problem }
        for key in ["thread-id", "category"] where aps[key] != nil && string(aps[key]!) == nil { return "\(key) must be a string" }
        for key in ["mutable-content", "content-available", "badge"] where aps[key] != nil && integer(aps[key]!) == nil {
            return "\(key) must be a number"
        }
        if pushType == "liveactivity" { return liveActivityProblem(aps) }
        if let alert = aps["alert"], let problem = alertProblem(alert) { return problem }
        return nil
    }

    /// A name, or `{"critical": 0|1, "name", "volume": 0…1}` for critical alerts.
    static func soundProblem(_ sound: JSONValue) -> String? {
        if string(sound) != nil { return nil }
        guard case .object = sound, let name = sound["name"], string(name) != nil else {
            return "sound must be a name or a dictionary with a name"
        }
        if let critical = sound["critical"], !(integer(critical).map { $0 == 0 || $0 == 1 } ?? false) {
            return "sound.critical must be 0 or 1"
        }
        if let volume = sound["volume"], !(number(volume).map { (0...1).contains($0) } ?? false) {
            return "sound.volume must be between 0 and 1"
        }
        return nil
    }

    static func alertProblem(_ alert: JSONValue) -> String? {
        if string(alert) != nil { return nil }
        guard case .object(let members) = alert else { return "alert must be a string or a dictionary" }
        for (key, value) in members {
            if key.hasSuffix("-args") {
                guard case .array(let arguments) = value, arguments.allSatisfy({ string($0) != nil }) else {
                    return "alert.\(key) must be an array of strings"
                }
            } else if string(value) == nil {
                return "alert.\(key) must be a string"
            }
        }
        return nil
    }

    /// `event`, `timestamp` and `content-state` always; `attributes-type` and `attributes` to start; `input-push-token`
    /// (1: the start asks for the activity's update token) a number. Apple documents no answer to `input-push-token` on
    /// an update or an end, so it passes there.
    static func liveActivityProblem(_ aps: JSONValue) -> String? {
        guard let event = aps["event"].flatMap(string), liveActivityEvents.contains(event) else {
            return "aps.event must be start, update or end"
        }
        guard aps["timestamp"].flatMap(integer) != nil else { return "aps.timestamp is required (seconds since the epoch)" }
        guard case .object? = aps["content-state"] else { return "aps.content-state is required" }
        for key in ["stale-date", "dismissal-date", "input-push-token"] where aps[key] != nil && integer(aps[key]!) == nil {
            return "aps.\(key) must be an integer"
        }
        if event == "start",
            aps["attributes-type"].flatMap(string) == nil || aps["attributes"].map({ if case .object = $0 { true } else { false } }) != true
        {
            return "a start event needs attributes-type and attributes"
        }
        if event == "start", aps["alert"] == nil { return "a start event needs an alert" }
        if let alert = aps["alert"] { return liveActivityAlertProblem(alert) }
        return nil
    }

    /// A Live Activity alert: `title` and `body`, each a string or `{"loc-key", "loc-args"}`, and `sound`.
    static func liveActivityAlertProblem(_ alert: JSONValue) -> String? {
        guard case .object(let members) = alert else { return "a Live Activity alert must be a dictionary" }
        for (key, value) in members {
            switch key {
            case "sound":
                if string(value) == nil { return "alert.sound must be a name" }
            case "title", "body":
                if string(value) != nil { continue }
                guard case .object = value, value["loc-key"].flatMap(string) != nil,
                    value["loc-args"].map({ if case .array(let items) = $0 { items.allSatisfy { string($0) != nil } } else { false } })
                        ?? true
                else { return "alert.\(key) must be a string or {loc-key, loc-args}" }
            default:
                return "a Live Activity alert has title, body and sound only, not \(key)"
            }
        }
        return nil
    }

    static func string(_ value: JSONValue) -> String? { if case .string(let text) = value { text } else { nil } }
    static func integer(_ value: JSONValue) -> Int64? { if case .integer(let number) = value { number } else { nil } }
    static func number(_ value: JSONValue) -> Double? {
        switch value {
        case .integer(let number): Double(number)
        case .double(let number): number
        default: nil
        }
    }
}

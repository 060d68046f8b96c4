import PushCore

/// The payload checks the sandbox makes, as Apple documents the keys ("Generating a remote notification",
/// the payload key reference; "Starting and updating Live Activities with ActivityKit push notifications").
/// A broken rule is answered 400 BadPayload: Apple documents no reason of its own for these.
enum APNsPayloadRules {
    static let interruptionLevels: Set<String> = ["passive", "active", "time-sensitive", "critical"]
    static let liveActivityEvents: Set<String> = ["start", "update", "end"]

    /// What is wrong with `aps`, nil when nothing is.
    static func problem(in payload: JSONValue, pushType: String) -> String? {
        guard let aps = payload["aps"] else { return pushType == "liveactivity" ? "liveactivity payload without aps" : nil }
        guard case .object = aps else { return "aps must be a dictionary" }
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
        if let alert = aps["alert"], let problem = alertProblem(alert) { return problem }
        return pushType == "liveactivity" ? liveActivityProblem(aps) : nil
    }

    /// A name, or `{"critical": 0|1, "name", "volume": 0…1}` for critical alerts.
    static func soundProblem(_ sound: JSONValue) -> String? {
        if string(sound) != nil { return nil }
        guard case .object = sound, let name = sound["name"], string(name) != nil else {
            return "sound must be a name or a dictionary with a name"
        }
        if let critical = sound["critical"], !(integer(critical).map { $0 == 0 || $0 == 1 } ?? false) { return "sound.critical must be 0 or 1" }
        if let volume = sound["volume"], !(number(volume).map { (0...1).contains($0) } ?? false) { return "sound.volume must be between 0 and 1" }
        return nil
    }

    static func alertProblem(_ alert: JSONValue) -> String? {
        if string(alert) != nil { return nil }
        guard case .object(let members) = alert else { return "alert must be a string or a dictionary" }
        for (key, value) in members {
            if key.hasSuffix("-args") {
                guard case .array(let arguments) = value, arguments.allSatisfy({ string($0) != nil }) else { return "alert.\(key) must be an array of strings" }
            } else if string(value) == nil {
                return "alert.\(key) must be a string"
            }
        }
        return nil
    }

    /// `event`, `timestamp` and `content-state` always; `attributes-type` and `attributes` to start.
    static func liveActivityProblem(_ aps: JSONValue) -> String? {
        guard let event = aps["event"].flatMap(string), liveActivityEvents.contains(event) else { return "aps.event must be start, update or end" }
        guard aps["timestamp"].flatMap(integer) != nil else { return "aps.timestamp is required (seconds since the epoch)" }
        guard case .object? = aps["content-state"] else { return "aps.content-state is required" }
        for key in ["stale-date", "dismissal-date"] where aps[key] != nil && integer(aps[key]!) == nil { return "aps.\(key) must be an integer" }
        if event == "start", aps["attributes-type"].flatMap(string) == nil || aps["attributes"].map({ if case .object = $0 { true } else { false } }) != true {
            return "a start event needs attributes-type and attributes"
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

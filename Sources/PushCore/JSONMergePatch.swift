extension JSONValue {
    /// `patch` merged into this document as RFC 7396 (JSON Merge Patch) defines it: an object's members
    /// merge member by member, recursively; `null` removes a member; any other value replaces. Used to
    /// apply a job's per-provider `overrides` last onto what a plugin built.
    public func merging(_ patch: JSONValue) -> JSONValue {
        guard case .object(let patchMembers) = patch else { return patch }
        var members: [(key: String, value: JSONValue)]
        if case .object(let existing) = self { members = existing } else { members = [] }
        for (key, value) in patchMembers {
            let index = members.firstIndex { $0.key == key }
            if case .null = value {
                if let index { members.remove(at: index) }
            } else if let index {
                members[index].value = members[index].value.merging(value)
            } else {
                members.append((key, JSONValue.null.merging(value)))
            }
        }
        return .object(members)
    }
}

/// A plugin's payload with the job's override for its provider merged in (`JSONValue.merging`).
public enum PayloadOverride {
    /// `bytes` (a JSON document the plugin wrote) with `patch` merged in; `bytes` unchanged without a patch.
    public static func apply(_ patch: JSONValue?, to bytes: [UInt8]) -> [UInt8] {
        guard let patch, let document = try? JSONParser.parse(bytes) else { return bytes }
        var writer = JSONWriter(capacity: bytes.count + 256)
        writer.value(document.merging(patch))
        return writer.bytes
    }

    /// Refuses a member of an override that would change what the core or the plugin must decide
    /// (a device token, a recipient): `paths` are member paths inside `override`.
    public static func refuse(_ paths: [[String]], in override: JSONValue, provider: ProviderID,
                              because reason: String) throws(JobRejection) {
        for path in paths where override.value(at: path) != nil {
            throw JobRejection(.invalidField, "overrides.\(provider).\(path.joined(separator: ".")) cannot be overridden: \(reason)")
        }
    }
}

extension JSONValue {
    /// The member at `path` (object keys, outermost first), nil when absent.
    public func value(at path: [String]) -> JSONValue? {
        var current = self
        for key in path {
            guard let next = current[key] else { return nil }
            current = next
        }
        return current
    }
}
